package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a FIFO at path. Should a reader block on it all the same,
// the test's end opens it for writing, which lets that reader go.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// returnsWithin runs f and fails the test if f has not returned within 10 s.
func returnsWithin(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked for 10s on a FIFO", what)
	}
}

func TestReadRegularRefusesWhatIsNotARegularFileWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo, file := filepath.Join(dir, "fifo"), filepath.Join(dir, "file")
	mkfifo(t, fifo)
	os.WriteFile(file, []byte("12345"), 0o600)
	tests := []struct {
		path string
		max  int64
		want error
	}{
		{fifo, 100, errNotRegular},
		{dir, 100, errNotRegular},
		{file, 4, errTooLarge},
		{file, 5, nil},
	}
	for _, tt := range tests {
		var err error
		returnsWithin(t, "readRegular("+tt.path+")", func() { _, err = readRegular(tt.path, tt.max) })
		if !errors.Is(err, tt.want) {
			t.Errorf("readRegular(%s, %d) = %v, want %v", tt.path, tt.max, err, tt.want)
		}
	}
}

func TestAFIFOInPlaceOfAFileCorralReadsIsRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	tests := []struct {
		name, config, want string
	}{
		{"the config itself", "", "fifo: cannot read config: not a regular file (a FIFO)"},
		{"authTokenFile", `{"authTokenFile":"fifo","mcpServers":{"a":{"command":"x"}}}`, "is not a regular file"},
		{"envFile", `{"mcpServers":{"a":{"command":"x","envFile":"fifo"}}}`, "mcpServers.a.envFile: " + fifo + " is not a regular file"},
		{"a secret file", `{"mcpServers":{"a":{"command":"x","env":{"T":"${file:fifo}"}}}}`, fifo + " is not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fifo
			if tt.config != "" {
				path = filepath.Join(dir, "config.json")
				os.WriteFile(path, []byte(tt.config), 0o600)
			}
			var err error
			returnsWithin(t, "LoadConfig", func() { _, err = LoadConfig(path, func(string) (string, bool) { return "", false }, nil) })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadConfig = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestAFIFOAtALazyServersCachePathIsIgnoredAndReplaced(t *testing.T) {
	dir, cache := stateDir(t), t.TempDir()
	_, stop := startLazyGateway(t, lazyConfig, dir, cache)
	stop()
	files := cacheFiles(t, cache)
	if len(files) != 1 {
		t.Fatalf("cache files = %q, want one", files)
	}
	os.Remove(files[0])
	mkfifo(t, files[0])
	c := newCatalogCache(cache, &Config{}, &ServerConfig{Command: "x", name: "a"})
	c.path = files[0]
	var err error
	returnsWithin(t, "catalogCache.load", func() { _, err = c.load() })
	if !errors.Is(err, errNotRegular) {
		t.Fatalf("load of a FIFO = %v, want errNotRegular", err)
	}

	var tg *testGateway
	returnsWithin(t, "starting corral", func() { tg, _ = startLazyGateway(t, lazyConfig, dir, cache) })
	b := tg.gw.backends[0]
	waitState(t, b, stateIdle, 15*time.Second)
	if len(b.items(kindTool)) == 0 {
		t.Error("the lazy server lists no tools")
	}
	if st, err := os.Lstat(files[0]); err != nil || !st.Mode().IsRegular() {
		t.Errorf("the cache path after the listing run: %v, %v; want a regular file", st, err)
	}
}
