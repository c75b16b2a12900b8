//go:build !windows

// This file stands in for github.com/containerd/containerd@v1.4.13/sys/oom_unix.go
// when scripts/k8s/build-tools.sh builds gVisor's containerd shim (go build
// -overlay): the same names, one behaviour changed.
//
// Why: the shim sets its own oom_score_adj to -999 and refuses to start when
// that fails. Lowering an oom_score_adj needs CAP_SYS_RESOURCE, which root on
// this machine does not have (it is outside the bounding set), so every gVisor
// Pod would fail. Here a refused lowering leaves the score as it is (the
// shim runs at containerd's own score, as runc's shim does under
// restrict_oom_score_adj); every other failure is still an error.
package sys

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

const (
	// OOMScoreMaxKillable is the lowest score that keeps a process killable.
	OOMScoreMaxKillable = -999
	// OOMScoreAdjMax is the kernel's OOM_SCORE_ADJ_MAX.
	OOMScoreAdjMax = 1000
)

// SetOOMScore writes score to the oom_score_adj of pid.
func SetOOMScore(pid, score int) error {
	path := fmt.Sprintf("/proc/%d/oom_score_adj", pid)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(strconv.Itoa(score))
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		if current, cerr := GetOOMScoreAdj(pid); cerr == nil && score < current {
			return nil // a lowering this host does not allow: keep the current score
		}
	}
	return err
}

// GetOOMScoreAdj reads the oom_score_adj of pid.
func GetOOMScoreAdj(pid int) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}
