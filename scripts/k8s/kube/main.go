// kube is one binary holding the six Kubernetes commands the test cluster
// runs, chosen by the name it is started under (kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl are
// symlinks to it) or by its first argument (`kube kubelet --version`).
//
// One binary because the six share almost all their packages: linking once
// instead of six times is most of what a warm rebuild costs, and the cache
// holds one ~200 MB file instead of six (scripts/k8s/README.md has the
// figures). Each command's body is what its own cmd/<name>/main.go does in
// k8s.io/kubernetes, including the blank imports that register log formats
// and metrics.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// Each command is built only when it is the one asked for: their constructors
// register flags and defaults that the others must not see.
var commands = map[string]func() int{
	"kube-apiserver":          func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int { return cli.Run(controllermanager.NewControllerManagerCommand()) },
	"kube-scheduler":          func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kubelet":                 func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy":              func() int { return cli.Run(proxy.NewProxyCommand()) },
	"kubectl":                 runKubectl,
}

func runKubectl() int {
	// As kubectl's own main: the verbosity is needed before the flags are parsed.
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	var command *cobra.Command = kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	return 0
}

func main() {
	name := filepath.Base(os.Args[0])
	run, ok := commands[name]
	if !ok && len(os.Args) > 1 {
		// `kube <command> args...`: the command's name takes argv[0]'s place.
		if run, ok = commands[os.Args[1]]; ok {
			os.Args = append([]string{os.Args[1]}, os.Args[2:]...)
		}
	}
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube COMMAND [ARGS...] (or start it as COMMAND); commands: %s\n",
			strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(run())
}
