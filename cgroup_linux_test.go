package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// This machine's layout, as the tests of parsing see it: v1 controllers, one
// of them (memory) in a subgroup, and a cgroup v2 hierarchy beside them.
const (
	hybridSelf = `9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/
`
	hybridMounts = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
)

func TestParseCgroupTreeUsesTheV1FreezerWhereMountedElseV2(t *testing.T) {
	tests := []struct {
		name         string
		self, mounts string
		wantV2       bool
		wantOwn      map[string]string
		wantWhy      string
	}{{
		name: "a hybrid machine uses the v1 hierarchies, each at corral's own cgroup",
		self: hybridSelf, mounts: hybridMounts,
		wantOwn: map[string]string{"cpu": "/sys/fs/cgroup/cpu", "freezer": "/sys/fs/cgroup/freezer",
			"memory": "/sys/fs/cgroup/memory/process_api/abc", "pids": "/sys/fs/cgroup/pids"},
	}, {
		name:   "a v2 machine uses corral's own v2 cgroup",
		self:   "0::/system.slice/corral.service\n",
		mounts: "25 21 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
		wantV2: true, wantOwn: map[string]string{"": "/sys/fs/cgroup/system.slice/corral.service"},
	}, {
		name:   "a container's v2 mount of its own subtree is read from its root",
		self:   "0::/docker/abc/sub\n",
		mounts: "25 21 0:22 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		wantV2: true, wantOwn: map[string]string{"": "/sys/fs/cgroup/sub"},
	}, {
		name: "v1 controllers without a freezer and no v2: containment is off",
		self: "8:pids:/\n", mounts: "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
		wantOwn: map[string]string{},
		wantWhy: "no cgroup hierarchy corral can use is mounted (neither cgroup v2 nor a v1 freezer hierarchy)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseCgroupTree("i", tt.self, tt.mounts)
			if got.v2 != tt.wantV2 || got.why != tt.wantWhy {
				t.Errorf("parseCgroupTree: v2 = %v, why = %q; want %v, %q", got.v2, got.why, tt.wantV2, tt.wantWhy)
			}
			if diff := cmp.Diff(tt.wantOwn, got.own); diff != "" {
				t.Errorf("parseCgroupTree: own (-want +got):\n%s", diff)
			}
		})
	}
}

// readTree returns every file under dir with its content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := os.ReadFile(path)
			rel, _ := filepath.Rel(dir, path)
			files[rel] = string(data)
		}
		return nil
	})
	return files
}

// The file writes of both versions, checked against a directory standing
// for the cgroup file system: this machine cannot set v2 limits (its v2
// hierarchy has no controllers).
func TestCreateWritesEachLimitInItsControllersFile(t *testing.T) {
	l := Limits{Memory: "64MiB", CPU: 1.5, Pids: 32}
	t.Run("v2: controllers passed down, then memory.max, swap 0, pids.max, cpu.max", func(t *testing.T) {
		dir := t.TempDir()
		tree := &cgroupTree{instance: "i", v2: true, own: map[string]string{"": dir, "memory": dir, "pids": dir, "cpu": dir}}
		cg, err := tree.create("srv", l)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"cgroup.subtree_control":          "+memory +pids +cpu",
			"corral-i/cgroup.subtree_control": "+memory +pids +cpu",
			"corral-i/srv/memory.max":         "67108864",
			"corral-i/srv/memory.swap.max":    "0",
			"corral-i/srv/pids.max":           "32",
			"corral-i/srv/cpu.max":            "150000 100000",
		}
		if diff := cmp.Diff(want, readTree(t, dir)); diff != "" {
			t.Errorf("files written (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{filepath.Join(dir, "corral-i/srv")}, cg.dirs); diff != "" {
			t.Errorf("dirs joined (-want +got):\n%s", diff)
		}
		if cg.overMemory() {
			t.Error("overMemory() = true before any OOM kill")
		}
		os.WriteFile(filepath.Join(dir, "corral-i/srv/memory.events"), []byte("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n"), 0o600)
		if !cg.overMemory() {
			t.Error("overMemory() = false after memory.events counts an oom_kill")
		}
	})
	t.Run("v1: a cgroup in the freezer and in each limited controller's hierarchy", func(t *testing.T) {
		root := t.TempDir()
		own := map[string]string{}
		for _, c := range []string{"freezer", "memory", "pids", "cpu"} {
			own[c] = filepath.Join(root, c)
		}
		tree := &cgroupTree{instance: "i", own: own}
		cg, err := tree.create("srv", l)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"memory/corral-i/srv/memory.limit_in_bytes":       "67108864",
			"memory/corral-i/srv/memory.memsw.limit_in_bytes": "67108864",
			"pids/corral-i/srv/pids.max":                      "32",
			"cpu/corral-i/srv/cpu.cfs_period_us":              "100000",
			"cpu/corral-i/srv/cpu.cfs_quota_us":               "150000",
		}
		if diff := cmp.Diff(want, readTree(t, root)); diff != "" {
			t.Errorf("files written (-want +got):\n%s", diff)
		}
		wantDirs := []string{filepath.Join(root, "freezer/corral-i/srv"), filepath.Join(root, "memory/corral-i/srv"),
			filepath.Join(root, "pids/corral-i/srv"), filepath.Join(root, "cpu/corral-i/srv")}
		if diff := cmp.Diff(wantDirs, cg.dirs); diff != "" {
			t.Errorf("dirs joined, the freezer's first (-want +got):\n%s", diff)
		}
		os.WriteFile(filepath.Join(root, "memory/corral-i/srv/memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 0o600)
		if !cg.overMemory() {
			t.Error("overMemory() = false after memory.oom_control counts an oom_kill")
		}
	})
}

func TestLimitsThatCannotBeEnforcedRefuseToStart(t *testing.T) {
	dir := stateDir(t)
	for _, tree := range []*cgroupTree{nil, {why: "no cgroups in this test"}} {
		p, err := startProcess(processSpec{name: "limited", command: fakeserverBin, args: fakeArgs(dir),
			log: testLogger(t), cgroups: tree, limits: Limits{Pids: 8, Memory: "1GiB"}})
		if err == nil {
			p.Stop(nil)
			t.Fatalf("startProcess with limits and cgroups %v: no error, want a refusal", tree)
		}
		if want := "limits.memory, limits.pids cannot be enforced"; !strings.Contains(err.Error(), want) {
			t.Errorf("startProcess error = %q, want it to contain %q", err, want)
		}
	}
	if procs := fakeProcesses(t, dir); len(procs) != 0 {
		t.Errorf("%d processes started, want none", len(procs))
	}
	if err := (&cgroupTree{why: "x"}).enforceable(Limits{}); err != nil {
		t.Errorf("enforceable(no limits) = %v, want nil: a server without limits starts anyway", err)
	}
}

// needCgroups returns the cgroup trees corral can create on this machine:
// the one it would use, and the v2 one where that is another; or skips.
func needCgroups(t testing.TB) map[string]*cgroupTree {
	t.Helper()
	trees := map[string]*cgroupTree{}
	tree := newCgroupTree(newInstanceID())
	if !tree.on() {
		t.Skipf("corral cannot create cgroups here: %s", tree.describe())
	}
	name := "v1"
	if tree.v2 {
		name = "v2"
	}
	trees[name] = tree
	if !tree.v2 {
		// A hybrid machine: its v2 hierarchy kills as well, if not limits.
		self, _ := os.ReadFile("/proc/self/cgroup")
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		var v2mounts []string
		for line := range strings.Lines(string(mounts)) {
			if strings.Contains(line, " - cgroup2 ") {
				v2mounts = append(v2mounts, line)
			}
		}
		if v2 := parseCgroupTree(newInstanceID(), string(self), strings.Join(v2mounts, "")); v2.why == "" {
			if v2.probe(); v2.on() {
				trees["v2"] = v2
			}
		}
	}
	for _, tree := range trees {
		t.Cleanup(func() {
			if err := tree.close(); err != nil {
				t.Errorf("removing the test's cgroups: %v", err)
			}
		})
	}
	return trees
}

func TestStoppingAServerKillsWhatEscapedWithAClearedEnvironment(t *testing.T) {
	for name, tree := range needCgroups(t) {
		t.Run(name, func(t *testing.T) {
			dir := stateDir(t)
			p, err := startProcess(processSpec{name: "escape", command: fakeserverBin, args: fakeArgs(dir, "-grandchild", "clearenv"),
				stopGrace: time.Second, killGrace: time.Second, pipeDrain: 100 * time.Millisecond,
				env: append(os.Environ(), markerEnv("test-instance", "escape")...), log: testLogger(t), cgroups: tree})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(nil) })
			waitFor(t, 10*time.Second, "the sleeper's state file", func() bool { return len(sleepers(t, dir)) == 1 })
			sleeper := sleepers(t, dir)[0]
			if env := environ(t, sleeper); len(env) != 0 {
				t.Fatalf("the escaped sleeper's environment = %v, want it empty: the test escapes nothing", env)
			}
			if s, _ := readStat(sleeper); s.ppid == p.pid {
				t.Fatalf("the sleeper is the server's child, want it double-forked away")
			}
			if marked := markedProcesses("test-instance", "escape"); len(marked) != 1 || marked[0] != p.pid {
				t.Fatalf("marked processes = %v, want only the server %d: the marker sweep would find the sleeper", marked, p.pid)
			}
			cgdir := p.cg.dirs[0]
			p.Stop(nil)
			if alive(sleeper) {
				t.Errorf("the sleeper %d that escaped with a cleared environment is alive after Stop returned", sleeper)
			}
			if _, err := os.Stat(cgdir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the server's cgroup %s is still there after Stop: %v", cgdir, err)
			}
		})
	}
}

func TestShimReportsWhatItCouldNotDo(t *testing.T) {
	tests := []struct {
		name, arg, want string
	}{
		{"a spec that is not JSON", "{", "corral shim: reading its spec: unexpected end of JSON input"},
		{"a program that is not there", `{"path":"/nonexistent/server","args":["server"]}`, "corral shim: executing /nonexistent/server: no such file or directory"},
		{"a cgroup that is not there", `{"path":"/bin/true","args":["true"],"cgroups":["/nonexistent/cgroup"]}`,
			"corral shim: joining cgroup /nonexistent/cgroup: open /nonexistent/cgroup/cgroup.procs: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command("/proc/self/exe", shimArg, tt.arg).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != shimExitCode {
				t.Errorf("shim exited with %v, want code %d", err, shimExitCode)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("shim said %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOverMemoryDescriptionNamesTheLimit(t *testing.T) {
	killed := exec.Command("sh", "-c", "kill -9 $$").Run()
	failed := exec.Command("sh", "-c", "exit 3").Run()
	if got, want := overMemoryDescription(killed, 512<<20), "killed: over its memory limit of 512 MiB"; got != want {
		t.Errorf("overMemoryDescription(SIGKILL) = %q, want %q", got, want)
	}
	if got, want := overMemoryDescription(failed, 3<<29), "exit status 3, after the kernel killed a process of it over its memory limit of 1.5 GiB"; got != want {
		t.Errorf("overMemoryDescription(exit 3) = %q, want %q", got, want)
	}
}

func TestLeftoverCgroupsOfDeadCorralsAreEmptiedAndRemoved(t *testing.T) {
	trees := needCgroups(t)
	tree := trees["v1"]
	if tree == nil {
		tree = trees["v2"]
	}
	dead := deadInstance(t).String()
	self, _ := selfIdentity()
	self.tag = "running"
	running := self.String()
	// One sleeping process in a server cgroup of each instance, in every
	// hierarchy, as corral would have put it there.
	start := func(instance string) *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for _, own := range tree.ownDirs() {
			dir := filepath.Join(own, cgroupPrefix+instance, "srv")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := joinPID(dir, cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			for _, own := range tree.ownDirs() {
				os.Remove(filepath.Join(own, cgroupPrefix+instance, "srv"))
				os.Remove(filepath.Join(own, cgroupPrefix+instance))
			}
		})
		return cmd
	}
	deadSleep, runningSleep := start(dead), start(running)
	garbage := filepath.Join(tree.killDir(), cgroupPrefix+"not-a-marker")
	os.Mkdir(garbage, 0o755)
	t.Cleanup(func() { os.Remove(garbage) })

	s, err := newSweeper("")
	if err != nil {
		t.Fatal(err)
	}
	got := tree.sweep(s)
	var swept, left []string
	for _, l := range got {
		if l.instance != dead && l.instance != running && l.instance != "not-a-marker" {
			continue // another dead corral's, on a machine that runs other tests
		}
		if l.why == "" {
			swept = append(swept, l.instance)
		} else {
			left = append(left, l.instance)
		}
		if l.err != nil {
			t.Errorf("sweeping %s: %v", l.instance, l.err)
		}
	}
	if diff := cmp.Diff([]string{dead}, swept); diff != "" {
		t.Errorf("swept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"not-a-marker"}, left); diff != "" {
		t.Errorf("left in doubt (-want +got):\n%s", diff)
	}
	if err := deadSleep.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the dead instance's process ended with %v, want killed", err)
	}
	if !alive(runningSleep.Process.Pid) {
		t.Errorf("the running instance's process was killed")
	}
	for _, own := range tree.ownDirs() {
		if _, err := os.Stat(filepath.Join(own, cgroupPrefix+dead)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dead instance's cgroup in %s is still there: %v", own, err)
		}
		if _, err := os.Stat(filepath.Join(own, cgroupPrefix+running, "srv")); err != nil {
			t.Errorf("the running instance's cgroup in %s is gone: %v", own, err)
		}
	}
}

// joinPID moves process pid into the cgroup dir.
func joinPID(dir string, pid int) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// needLimits skips t unless the cgroups corral would use here can enforce
// l: the controllers are there and, on v2, can be passed on.
func needLimits(t testing.TB, l Limits) {
	t.Helper()
	tree := newCgroupTree(newInstanceID())
	cg, err := tree.create("probe", l)
	if err != nil {
		t.Skipf("corral cannot enforce %s here: %v", l.set(), err)
	}
	cg.remove()
	tree.close()
}

func TestServerOverItsMemoryLimitIsKilledAndRestartedAndItsCallerTold(t *testing.T) {
	t.Parallel()
	needLimits(t, Limits{Memory: "64MiB"})
	tg := startGateway(t, `{"restartDelay":"10ms","mcpServers":{
		"hog": {"command":"FAKE","args":["-state","STATE","-name","hog"],"limits":{"memory":"64MiB"}},
		"calm": {"command":"FAKE","args":["-state","STATE","-name","calm","-prefix","c_"]}}}`)
	hog := tg.gw.backends[1]
	c := connect(t, tg.url)
	msg := c.callTool("1", "alloc", `{"mib":256}`)
	const want = "killed: over its memory limit of 64 MiB"
	if msg.Error == nil || !strings.Contains(msg.Error.Message, want) {
		t.Fatalf("alloc of 256 MiB under a 64 MiB limit answered %s %+v, want an error naming %q", msg.Result, msg.Error, want)
	}
	if got := toolText(t, c.callTool("2", "c_whoami", `{}`)); !strings.Contains(got, `"calm"`) {
		t.Errorf("the other server answered %q", got)
	}
	waitState(t, hog, stateReady, 10*time.Second)
	if h := hog.health(); h.LastExit != want || h.Restarts != 1 {
		t.Errorf("health = %+v, want lastExit %q and 1 restart", h, want)
	}
	if got := toolText(t, c.callTool("3", "alloc", `{"mib":8}`)); got != "allocated 8 MiB" {
		t.Errorf("after the restart, alloc of 8 MiB answered %q", got)
	}
}

func TestPidsLimitStopsAForkBombInsideTheServer(t *testing.T) {
	t.Parallel()
	needLimits(t, Limits{Pids: 48})
	tg := startGateway(t, `{"mcpServers":{"bomb": {"command":"FAKE","args":["-state","STATE"],"limits":{"pids":48}}}}`)
	c := connect(t, tg.url)
	msg := c.callTool("1", "fork", `{"count":200}`)
	t.Logf("fork answered %s %+v", msg.Result, msg.Error)
	if msg.Error == nil {
		got := toolText(t, msg)
		if !strings.Contains(got, "resource temporarily unavailable") || strings.HasPrefix(got, "started 200 ") {
			t.Errorf("fork of 200 under a pids limit of 48 answered %q, want fewer started and EAGAIN", got)
		}
	}
	// A Go server may itself die of the limit, when its runtime cannot
	// start a thread (the call then fails): its forks go with its cgroup.
	if n := len(liveMarked("-role forked -name fake -state " + tg.dir)); n >= 48 || (msg.Error == nil && n == 0) {
		t.Errorf("%d processes forked under a limit of 48 processes and threads (call error %+v)", n, msg.Error)
	}
}

func TestCheckAndTheLogSayWhetherServersAreContained(t *testing.T) {
	t.Parallel()
	needLimits(t, Limits{Pids: 64})
	const limited = `{"listen":"127.0.0.1:0","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"],"limits":{"pids":64}}}}`
	ok := startCorral(t, limited, "-check")
	if code := ok.waitExit(20 * time.Second); code != 0 {
		t.Errorf("-check as root exited %d, want 0", code)
	}
	if out, _ := io.ReadAll(ok.stdout); !strings.Contains(string(out), "containment: each server in a cgroup") {
		t.Errorf("-check as root does not say servers are contained:\n%s", out)
	}

	// Another user cannot create cgroups here.
	const uid = 64124
	refused := startCorralAs(t, uid, limited, "-check")
	if code := refused.waitExit(20 * time.Second); code != 2 {
		t.Errorf("-check with limits it cannot enforce exited %d, want 2", code)
	}
	if out, _ := io.ReadAll(refused.stdout); !strings.Contains(string(out), "containment: off: cannot create cgroups under") {
		t.Errorf("-check as user %d does not say why containment is off:\n%s", uid, out)
	}
	refused.waitLog(`mcpServers.a.limits: limits.pids cannot be enforced: corral cannot put servers in cgroups here: cannot create cgroups under .*; this server would not start`)

	plain := startCorralAs(t, uid, `{"listen":"127.0.0.1:0","mcpServers":{"a": {"command":"FAKE","args":["-state","STATE"]}}}`)
	plain.waitLog(`msg=containment cgroups=off .*why="cannot create cgroups under`)
	plain.waitHTTP(1)
}

func TestCgroupPIDsListsEachProcessOnce(t *testing.T) {
	dir := t.TempDir()
	// cgroup v1's cgroup.procs may list a process several times.
	os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("12\n7\n12\n7\n3\n"), 0o600)
	if pids, err := cgroupPIDs(dir); err != nil || !slices.Equal(pids, []int{3, 7, 12}) {
		t.Errorf("cgroupPIDs = %v, %v; want [3 7 12]", pids, err)
	}
}
