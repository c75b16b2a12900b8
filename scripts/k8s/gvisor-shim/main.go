// containerd-shim-runsc-v1: gVisor's own shim command, unchanged (the one
// change is the file oom_unix.go that build-tools.sh overlays; it says why).
package main

import "gvisor.dev/gvisor/shim/cli"

func main() {
	cli.Main()
}
