package main

// This file holds the containment shim: a server that needs containment is
// started as corral itself, re-executed (/proc/self/exe) with shimArg, which
// applies the containment to itself and then executes the server in its
// place: same PID, same process group, same environment markers, same
// parent-death signal, so the sweep and the stop ladder see nothing new.
// Go's os/exec has no hook between fork and exec, and Landlock and
// no_new_privs must be applied by the process itself.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// shimArg is argv[1] of a corral process started as a containment shim.
const shimArg = "__corral_shim"

// shimSpec is what the shim applies to itself before it executes the server.
// It travels as JSON in argv[2]; argv[3:] is unused.
type shimSpec struct {
	Path    string       `json:"path"`              // absolute path of the server's program (resolved by corral)
	Args    []string     `json:"args"`              // the server's argv, Args[0] included
	Cgroups []string     `json:"cgroups,omitempty"` // cgroup directories to join (18a)
	Sandbox *sandboxPlan `json:"sandbox,omitempty"` // what sandbox.go applies; nil for none
}

// argOrEmpty returns os.Args[i], or "" if there are fewer arguments.
func argOrEmpty(i int) string {
	if i < len(os.Args) {
		return os.Args[i]
	}
	return ""
}

// runShim is called by main (and by TestMain in the root package's tests, since
// /proc/self/exe is the test binary there) when os.Args[1] == shimArg. It never
// returns on success (syscall.Exec); on failure it writes one line
// "corral shim: <what failed>: <error>" to stderr and exits 126.
func runShim(arg string) int {
	// Landlock and no_new_privs apply to the calling thread, and execve keeps
	// the calling thread's: everything below runs on this one.
	runtime.LockOSThread()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "corral shim: %s: %v\n", what, err)
		return 126
	}
	var spec shimSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		return fail("reading its spec", err)
	}
	// 1. cgroups (18a) go here.
	// 2. sandbox (sandbox_linux.go).
	if err := applySandbox(spec.Sandbox); err != nil {
		return fail("sandbox", err)
	}
	// 3. the server, in this process's place.
	err := syscall.Exec(spec.Path, spec.Args, os.Environ())
	return fail("executing "+spec.Path, err)
}

// shimProcess makes cmd, not yet started, start the shim with spec, which
// then executes what cmd would have run. Path and Args of spec are taken
// from cmd.
func shimProcess(cmd *exec.Cmd, spec shimSpec) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	spec.Path, spec.Args = cmd.Path, cmd.Args
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cmd.Path = "/proc/self/exe"
	cmd.Args = []string{"corral", shimArg, string(data)}
	return nil
}

// contain makes cmd, not yet started, start through the shim if spec asks
// for containment; else it leaves cmd as it is. An error means the server
// must not be started: what it asks for cannot be had here.
func (spec processSpec) contain(cmd *exec.Cmd) error {
	if spec.sandbox == nil {
		return nil
	}
	probe := spec.sandboxHost
	if probe == nil {
		probe = func() sandboxHost { return probeSandboxHost(false) }
	}
	plan, err := newSandboxPlan(spec.name, spec.sandbox, probe())
	if err != nil || plan == nil {
		return err
	}
	plan.procAttr(cmd.SysProcAttr)
	return shimProcess(cmd, shimSpec{Sandbox: plan})
}
