//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// Sandboxes are built from Linux namespaces, prctl and Landlock. Elsewhere a
// server with a sandbox rule is refused, never run unconfined: no Landlock
// refuses filesystem rules (newSandboxPlan), and applySandbox the rest.

var errNoSandbox = errors.New("sandboxes need Linux")

func probeSandboxHost(probeNet bool) sandboxHost {
	h := sandboxHost{root: os.Geteuid() == 0, landlockErr: errNoSandbox}
	if probeNet {
		h.netErr = errNoSandbox
	}
	return h
}

func (p *sandboxPlan) procAttr(attr *syscall.SysProcAttr) {}

func sandboxStartError(cmd *exec.Cmd, err error) error { return err }

func applySandbox(p *sandboxPlan) error {
	if p == nil {
		return nil
	}
	return errNoSandbox
}
