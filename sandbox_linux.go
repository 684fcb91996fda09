package main

// This file enforces a sandbox plan on Linux: corral starts the shim in new
// namespaces (procAttr), and the shim, before it executes the server, brings
// the new loopback up, sets no_new_privs and restricts itself with Landlock
// (applySandbox).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"unsafe"
)

// probeSandboxHost returns what this machine offers a sandbox. With
// probeNet, it also starts a process in the namespaces a sandbox without
// network needs, to learn whether it can (for -check; a server's start
// finds out by itself).
func probeSandboxHost(probeNet bool) sandboxHost {
	h := sandboxHost{root: os.Geteuid() == 0}
	h.landlock, h.landlockErr = landlockABI()
	if probeNet {
		h.netErr = probeNamespaces(h.root)
	}
	return h
}

// procAttr sets the namespaces of the plan on attr, the shim's: a network
// namespace of its own and, where corral is not root, a user namespace in
// which only corral's user and group are mapped, to themselves, so the
// server runs as the same user with no privilege over anything outside. A
// nil p does nothing.
func (p *sandboxPlan) procAttr(attr *syscall.SysProcAttr) {
	if p == nil {
		return
	}
	if p.NewNet {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if p.NewUser {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
		// A user other than root loses its capabilities when it executes a
		// program, the shim included, unless they are ambient. The shim
		// needs CAP_NET_ADMIN, in its own namespaces only, to bring its
		// loopback up; it clears it before it executes the server.
		attr.AmbientCaps = []uintptr{capNetAdmin}
	}
}

const capNetAdmin = 12 // CAP_NET_ADMIN

// sandboxStartError explains err, the failure to start the shim of cmd, if
// it is the kernel's refusal of the namespaces of a sandbox; else it returns
// err unchanged.
func sandboxStartError(cmd *exec.Cmd, err error) error {
	attr := cmd.SysProcAttr
	if attr == nil || attr.Cloneflags&(syscall.CLONE_NEWNET|syscall.CLONE_NEWUSER) == 0 {
		return err
	}
	refused := false
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.EACCES, syscall.EINVAL, syscall.ENOSPC, syscall.EUSERS} {
		refused = refused || errors.Is(err, errno)
	}
	if !refused {
		return err
	}
	why := "this process may not create a network namespace"
	if attr.Cloneflags&syscall.CLONE_NEWUSER != 0 {
		why = "corral is not root, and this machine does not let it create a user namespace (see user.max_user_namespaces, kernel.unprivileged_userns_clone, or an AppArmor or seccomp policy)"
	}
	return fmt.Errorf("sandbox with \"network\": false: %s: %w; run corral with the privilege, or remove the rule", why, err)
}

// probeNamespaces starts the shim in the namespaces of a sandbox without
// network, with a spec it cannot run, and reports whether it could be
// started.
func probeNamespaces(root bool) error {
	cmd := exec.Command("/proc/self/exe", shimArg, "{}")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	(&sandboxPlan{NewNet: true, NewUser: !root}).procAttr(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return sandboxStartError(cmd, err)
	}
	cmd.Wait() // the shim fails at once: its spec names no program
	return nil
}

// applySandbox applies p to this process, on the calling thread, which must
// stay locked to it until it executes the server. A nil p does nothing.
func applySandbox(p *sandboxPlan) error {
	if p == nil {
		return nil
	}
	if p.NewNet {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("server %q: bringing loopback up in its network namespace: %w", p.Server, err)
		}
	}
	if p.NewUser {
		const prCapAmbient, prCapAmbientClearAll = 47, 4
		if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); errno != 0 {
			return fmt.Errorf("server %q: clearing the shim's ambient capabilities: %w", p.Server, errno)
		}
	}
	if p.NoNewPrivs {
		const prSetNoNewPrivs = 38
		if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
			return fmt.Errorf("server %q: setting no_new_privs: %w", p.Server, errno)
		}
	}
	if p.Landlock > 0 {
		if err := p.restrictFilesystem(); err != nil {
			return fmt.Errorf("server %q: Landlock: %w", p.Server, err)
		}
	}
	return nil
}

// loopbackUp brings up "lo", the one interface of a new network namespace,
// which starts down: without it the server could not even reach itself.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: the name, then a union whose short flags come first
	copy(ifr[:syscall.IFNAMSIZ-1], "lo")
	ioctl := func(req uintptr) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
			return errno
		}
		return nil
	}
	if err := ioctl(syscall.SIOCGIFFLAGS); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	flags := binary.NativeEndian.Uint16(ifr[syscall.IFNAMSIZ:])
	binary.NativeEndian.PutUint16(ifr[syscall.IFNAMSIZ:], flags|syscall.IFF_UP)
	if err := ioctl(syscall.SIOCSIFFLAGS); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// Landlock's system calls have the same numbers on every architecture that
// has them (they came after the numbers were unified), amd64 and arm64
// included.
const (
	sysLandlockCreateRuleset = 444
	sysLandlockAddRule       = 445
	sysLandlockRestrictSelf  = 446

	landlockCreateRulesetVersion = 1 << 0
	landlockRulePathBeneath      = 1

	oPath = 0x200000 // O_PATH, which package syscall lacks: an fd that names a path, opens nothing
)

// Landlock's filesystem access rights (include/uapi/linux/landlock.h).
const (
	llExecute    = 1 << 0
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5
	llABI1Rights = llMakeSym<<1 - 1
	llReadRights = llExecute | llReadFile | llReadDir
	llFileRights = llExecute | llWriteFile | llReadFile | llTruncate | llIoctlDev // those a rule on a file (not a directory) may hold

	llScopeAbstractUnixSocket = 1 << 0 // ABI 6
	llScopeSignal             = 1 << 1 // ABI 6
)

// landlockABI returns the version of the Landlock ABI this kernel offers, or
// an error saying why it offers none (ENOSYS: not built in; EOPNOTSUPP:
// built in but not enabled at boot).
func landlockABI() (int, error) {
	v, _, errno := syscall.Syscall(sysLandlockCreateRuleset, 0, 0, landlockCreateRulesetVersion)
	switch {
	case errno == syscall.ENOSYS:
		return 0, errors.New("this kernel has no Landlock (landlock_create_ruleset: ENOSYS)")
	case errno == syscall.EOPNOTSUPP:
		return 0, errors.New("Landlock is built into this kernel but not enabled (landlock_create_ruleset: EOPNOTSUPP; add landlock to the lsm= boot parameter)")
	case errno != 0:
		return 0, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	return int(v), nil
}

// landlockHandled returns every filesystem right ABI abi knows: each is
// denied but where a rule grants it.
func landlockHandled(abi int) uint64 {
	r := uint64(llABI1Rights)
	if abi >= 2 {
		r |= llRefer
	}
	if abi >= 3 {
		r |= llTruncate
	}
	if abi >= 5 {
		r |= llIoctlDev
	}
	return r
}

// restrictFilesystem restricts this thread, and what it executes, to the
// plan's paths: read and execute under ReadOnly, every right under Writable.
// From ABI 6 it also keeps signals and abstract Unix sockets within the
// sandbox.
func (p *sandboxPlan) restrictFilesystem() error {
	handled := landlockHandled(p.Landlock)
	// struct landlock_ruleset_attr has grown with the ABI; a kernel takes
	// the size it knows, or less.
	attr := struct{ handledAccessFS, handledAccessNet, scoped uint64 }{handledAccessFS: handled}
	size := unsafe.Sizeof(attr.handledAccessFS)
	if p.Landlock >= 6 {
		// Neither signals nor abstract Unix sockets reach out of the
		// sandbox: the server cannot kill corral, nor talk to what listens
		// on an abstract socket outside.
		attr.scoped = llScopeAbstractUnixSocket | llScopeSignal
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := syscall.Syscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer syscall.Close(int(fd))
	for _, r := range []struct {
		paths  []string
		access uint64
	}{{p.ReadOnly, llReadRights}, {p.Writable, handled}} {
		for _, path := range r.paths {
			if err := landlockAllow(int(fd), path, r.access&handled); err != nil {
				return fmt.Errorf("allowing %s: %w", path, err)
			}
		}
	}
	if _, _, errno := syscall.Syscall(sysLandlockRestrictSelf, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// landlockAllow adds to the ruleset rulesetFD the rule granting access
// beneath path (only the rights a file can have, if path is not a
// directory).
func landlockAllow(rulesetFD int, path string, access uint64) error {
	fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		access &= llFileRights
	}
	// struct landlock_path_beneath_attr is packed: a u64, then an s32.
	var rule [12]byte
	binary.NativeEndian.PutUint64(rule[0:], access)
	binary.NativeEndian.PutUint32(rule[8:], uint32(int32(fd)))
	if _, _, errno := syscall.Syscall6(sysLandlockAddRule, uintptr(rulesetFD), landlockRulePathBeneath, uintptr(unsafe.Pointer(&rule[0])), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule: %w", errno)
	}
	return nil
}
