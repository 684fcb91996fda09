package main

// This file holds the containment shim. Go's os/exec has no hook between
// fork and exec, so a server that must start contained is started through
// corral itself: corral runs its own executable (/proc/self/exe) as the shim,
// the shim applies containment to itself, then executes the server in its
// place: the same PID, process group, environment and parent-death signal,
// so the stop ladder and the sweep see nothing new. See
// /work/shim-contract.md.

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// shimArg is argv[1] of a corral process started as a containment shim.
const shimArg = "__corral_shim"

// shimExitCode is the shim's exit code when it cannot contain or execute
// the server (the shell's "found but cannot execute").
const shimExitCode = 126

// shimSpec is what the shim applies to itself before it executes the server.
// It travels as JSON in argv[2]; argv[3:] is unused.
type shimSpec struct {
	Path    string       `json:"path"`              // absolute path of the server's program (resolved by corral)
	Args    []string     `json:"args"`              // the server's argv, Args[0] included
	Cgroups []string     `json:"cgroups,omitempty"` // cgroup directories to join
	Sandbox *sandboxPlan `json:"sandbox,omitempty"` // what the shim applies to itself (sandbox.go); nil for nothing
}

// argOrEmpty returns os.Args[i], or "" if there is none.
func argOrEmpty(i int) string {
	if i < len(os.Args) {
		return os.Args[i]
	}
	return ""
}

// runShim is called by main (and by TestMain in the root package's tests,
// since /proc/self/exe is the test binary there) when os.Args[1] == shimArg.
// It never returns on success (syscall.Exec); on failure it writes one line
// "corral shim: <what failed>: <error>" to stderr and returns 126.
func runShim(arg string) int {
	// Landlock and no_new_privs apply to the calling thread, and execve keeps
	// the calling thread's: everything below runs on this one.
	runtime.LockOSThread()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "corral shim: %s: %v\n", what, err)
		return shimExitCode
	}
	var spec shimSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		return fail("reading its spec", err)
	}
	if spec.Path == "" || len(spec.Args) == 0 {
		return fail("reading its spec", errors.New("no program to run"))
	}
	// 1. cgroups: from here on, everything the server starts is counted,
	// limited, and killed with its cgroup.
	for _, dir := range spec.Cgroups {
		if err := joinCgroup(dir); err != nil {
			return fail("joining cgroup "+dir, err)
		}
	}
	// 2. sandbox: loopback up in its network namespace, no_new_privs,
	// Landlock (sandbox_linux.go).
	if err := applySandbox(spec.Sandbox); err != nil {
		return fail("sandbox", err)
	}
	// 3. the server, in this process's place.
	return fail("executing "+spec.Path, syscall.Exec(spec.Path, spec.Args, os.Environ()))
}

// joinCgroup moves this process into the cgroup dir, v1 or v2 alike.
func joinCgroup(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(os.Getpid())), 0)
}

// shimCommand returns the command that starts the server spec describes
// through the shim, joining the cgroup directories dirs and applying the
// sandbox plan, if not nil. The program is
// resolved here as exec.Command would resolve it (PATH, then relative to the
// working directory), so that a missing program is the same error as
// without the shim.
func shimCommand(spec processSpec, dirs []string, plan *sandboxPlan) (*exec.Cmd, error) {
	server := programCommand(spec)
	if server.Err != nil {
		return nil, server.Err
	}
	path := server.Path
	if !filepath.IsAbs(path) {
		base := spec.dir
		if base == "" {
			base, _ = os.Getwd()
		} else if !filepath.IsAbs(base) {
			wd, _ := os.Getwd()
			base = filepath.Join(wd, base)
		}
		path = filepath.Join(base, path)
	}
	if _, err := exec.LookPath(path); err != nil {
		return nil, err // as exec.Cmd.Start would fail, before anything runs
	}
	arg, err := json.Marshal(shimSpec{Path: path, Args: server.Args, Cgroups: dirs, Sandbox: plan})
	if err != nil {
		return nil, err
	}
	return exec.Command("/proc/self/exe", shimArg, string(arg)), nil
}

// programCommand returns the command that runs spec's program with its
// args, the program found as findProgram finds it: through the PATH of
// spec's environment (the server's env's PATH, when it sets one), as a
// desktop client finds it, and as -check does.
func programCommand(spec processSpec) *exec.Cmd {
	cmd := exec.Command(spec.command, spec.args...)
	if spec.command == "" || strings.Contains(spec.command, "/") {
		return cmd
	}
	if path, err := findProgram(spec.command, spec.pathList(), spec.dir); err == nil {
		cmd.Path, cmd.Err = path, nil
	} else {
		cmd.Path, cmd.Err = spec.command, &exec.Error{Name: spec.command, Err: exec.ErrNotFound}
	}
	return cmd
}

// pathList returns the PATH spec's process gets: its environment's, else
// corral's own.
func (spec processSpec) pathList() string {
	pathList := os.Getenv("PATH") // when spec's environment has none
	for _, kv := range spec.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v // the last one is the one the process gets
		}
	}
	return pathList
}

// containedCommand returns the command that starts the server spec
// describes, its cgroup and its sandbox plan: through the shim where spec
// puts servers in cgroups or has a sandbox that asks for something, the
// shim joining a cgroup of the server's own and applying the plan; as it
// is, with no cgroup and a nil plan, elsewhere. Limits or a sandbox rule
// that cannot be enforced are an error: a server never runs without the
// limits, or with less of the sandbox, than its config asks for. The caller
// sets the plan's namespaces on the command (sandboxPlan.procAttr) with its
// other attributes, and removes the cgroup if the command does not start.
func containedCommand(spec processSpec) (*exec.Cmd, *serverCgroup, *sandboxPlan, error) {
	plan, err := spec.sandboxPlan()
	if err != nil {
		return nil, nil, nil, err
	}
	cg, err := spec.cgroups.create(spec.name, spec.limits)
	if err != nil {
		return nil, nil, nil, err
	}
	if cg == nil && plan == nil {
		return programCommand(spec), nil, nil, nil
	}
	var dirs []string // none without a cgroup
	if cg != nil {
		dirs = cg.dirs
	}
	cmd, err := shimCommand(spec, dirs, plan)
	if err != nil {
		cg.remove()
		return nil, nil, nil, err
	}
	return cmd, cg, plan, nil
}

// overMemoryDescription says how a process of a server ended whose cgroup
// had a process killed by the kernel over the memory limit of limit bytes,
// after waitErr: "killed: over its memory limit of 512 MiB" when the server
// itself was killed.
func overMemoryDescription(waitErr error, limit int64) string {
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return "killed: over its memory limit of " + formatSize(limit)
		}
	}
	what := "exit status 0"
	if waitErr != nil {
		what = waitErr.Error()
	}
	return what + ", after the kernel killed a process of it over its memory limit of " + formatSize(limit)
}

// processSpec says how to run one server process.
type processSpec struct {
	name    string   // the server's name, for messages
	role    string   // what the process is, for messages: if empty, "server"
	command string   // the program; looked up in PATH when it has no slash
	args    []string // its arguments
	env     []string // its whole environment
	dir     string   // its working directory; if empty, corral's

	// stopGrace is how long the process has to exit once its stdin is closed
	// before its group gets SIGTERM; killGrace how long after SIGTERM before
	// SIGKILL. pipeDrain bounds the wait for the pipes to reach EOF after the
	// process has exited (a descendant may hold them open forever).
	stopGrace, killGrace, pipeDrain time.Duration

	log *slog.Logger // receives the server's stderr, line by line

	// stderrLines and stderrBytes are how many lines and bytes of the
	// server's stderr may be copied into log a second (see drainLines). If
	// zero, the defaults of maxStderrLinesPerSecond and
	// maxStderrBytesPerSecond.
	stderrLines, stderrBytes int

	// quiet, if not nil, logs the server's stderr at debug level while it is
	// set: the backend sets it while its server fails again for a cause
	// already logged (see backend.run).
	quiet *atomic.Bool

	// reaper, if not nil, is told of the process so that it never reaps it.
	reaper *orphanReaper

	// sandbox, if not nil, is what the server may reach (sandbox.go), and
	// sandboxHost what this machine offers; if nil, probeSandboxHost.
	sandbox     *SandboxConfig
	sandboxHost func() sandboxHost

	// cgroups, if on, is where the process gets a cgroup of its own, with
	// limits; the process is then started through the shim (shim.go).
	// Limits set where cgroups is not on are an error at start.
	cgroups *cgroupTree
	limits  Limits

	// detached starts a process corral will leave running (an unmanaged
	// prerequisite): in a session of its own, with no parent-death signal,
	// and with /dev/null for stdin, stdout and stderr, so that it neither
	// dies with corral nor on a write to a pipe corral no longer reads.
	detached bool
}

// what returns what the process is, for messages: its role, or "server".
func (s *processSpec) what() string {
	if s.role == "" {
		return "server"
	}
	return s.role
}

// sandboxPlan returns the plan for the sandbox of spec's server on this
// machine, or nil for none (see newSandboxPlan).
func (spec processSpec) sandboxPlan() (*sandboxPlan, error) {
	if spec.sandbox == nil {
		return nil, nil
	}
	probe := spec.sandboxHost
	if probe == nil {
		probe = func() sandboxHost { return probeSandboxHost(false) }
	}
	return newSandboxPlan(spec.name, spec.sandbox, probe())
}
