package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// removeLoggedCgroups removes the cgroups of a corral, killed by a test,
// whose log lines are log: corral names them as it starts ("cgroups="), and
// a corral killed with SIGKILL cannot remove them itself. What is left in
// them is killed first.
func removeLoggedCgroups(t testing.TB, log []string) {
	t.Helper()
	re := regexp.MustCompile(`containment: .* cgroups="?([^" ]+)"?`)
	for _, line := range log {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for i, root := range strings.Split(m[1], ",") {
			servers, _ := os.ReadDir(root)
			for _, srv := range servers {
				if !srv.IsDir() {
					continue
				}
				dir := filepath.Join(root, srv.Name())
				if i == 0 { // the hierarchy that kills
					_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
					killCgroup(dir, err == nil)
				}
				removeCgroupDir(t, dir)
			}
			removeCgroupDir(t, root)
		}
	}
}

// removeCgroupDir removes the cgroup dir, waiting a moment for the
// processes killed in it to be gone.
func removeCgroupDir(t testing.TB, dir string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("removing the cgroup of a corral the test killed: %v", err)
			return
		}
	}
}
