package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// listingGateway returns a gateway whose backends are n listed stand-ins
// (see listedBackend), each with tools tools, prefixed "pN" if prefixed, and
// a session that counts the notifications it hears.
func listingGateway(t testing.TB, n, tools int, prefixed bool) (*Gateway, *atomic.Int64) {
	cfg := &Config{}
	cfg.applyDefaults()
	g := NewGateway(cfg, testLogger(t), nil)
	for i := range n {
		var names []string
		for j := range tools {
			names = append(names, fmt.Sprintf("tool_%d", j))
		}
		prefix := ""
		if prefixed {
			prefix = fmt.Sprintf("p%d", i)
		}
		g.backends = append(g.backends, listedBackend(fmt.Sprintf("s%03d", i), prefix, map[kind][]string{kindTool: names}))
	}
	g.rebuildCatalog()
	var heard atomic.Int64
	s := g.sessions.newSession(func([]byte) { heard.Add(1) }, anonymousPrincipal, "")
	s.mu.Lock()
	s.initialized = true
	s.mu.Unlock()
	return g, &heard
}

func TestABurstOfServerChangesIsOneRebuildAndOneListChanged(t *testing.T) {
	const n = 50
	g, heard := listingGateway(t, n, 2, false)
	// Each server lists a tool more, and says so, while a rebuild holds
	// the catalog: the changes come in a burst.
	g.catMu.Lock()
	base, rebuilds := g.catWanted.Load(), g.catRebuilds
	var wg sync.WaitGroup
	for _, b := range g.backendList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, _ := json.Marshal(map[string]string{"name": "new_" + b.name})
			b.up.mu.Lock()
			b.up.lists[kindTool] = append(b.up.lists[kindTool], backendItem{name: "new_" + b.name, raw: raw})
			b.up.mu.Unlock()
			g.backendChanged()
		}()
	}
	for g.catWanted.Load() < base+n { // every change is counted and waits for catMu
		runtime.Gosched()
	}
	g.catMu.Unlock()
	wg.Wait()
	g.catMu.Lock()
	rebuilds = g.catRebuilds - rebuilds
	g.catMu.Unlock()
	if rebuilds != 1 {
		t.Errorf("a burst of %d changes made %d rebuilds of the catalog, want 1", n, rebuilds)
	}
	if got := heard.Load(); got != 1 {
		t.Errorf("after a burst of %d changes the session heard %d notifications, want 1 tools/list_changed", n, got)
	}
	for _, b := range g.backendList() {
		if g.cat.lookup(kindTool, "new_"+b.name) == nil {
			t.Errorf("after the burst the catalog lacks %q", "new_"+b.name)
		}
	}
}

func TestAChangeWaitsForTheCatalogThatHoldsIt(t *testing.T) {
	// Whoever reports a change sees it in the catalog when backendChanged
	// returns, even when another's rebuild covered it.
	g, _ := listingGateway(t, 20, 1, true)
	var wg sync.WaitGroup
	for _, b := range g.backendList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				name := fmt.Sprintf("v%d", i)
				raw, _ := json.Marshal(map[string]string{"name": name})
				b.up.mu.Lock()
				b.up.lists[kindTool] = []backendItem{{name: name, raw: raw}}
				b.up.mu.Unlock()
				g.backendChanged()
				g.mu.Lock()
				cat := g.cat
				g.mu.Unlock()
				if cat.lookup(kindTool, b.cfg.Prefix+toolSeparator+name) == nil {
					t.Errorf("backendChanged returned before the catalog held %s's %q", b.name, name)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestRebuildingAnUnchangedCatalogDoesNotRenameItsItemsAgain(t *testing.T) {
	// Prefixed servers' items are renamed (a JSON round trip each); a
	// rebuild after one server's change renames none of the others' again.
	g, _ := listingGateway(t, 200, 5, true)
	allocs := testing.AllocsPerRun(5, g.rebuildCatalog)
	// A rebuild allocates its lists, maps and qualified names, about one
	// allocation an item; renaming the 1,000 items again would take more
	// than ten allocations each.
	if allocs > 3000 {
		t.Errorf("a rebuild of 200 prefixed servers' 1,000 unchanged tools made %.0f allocations, want at most 3,000", allocs)
	}
}

func BenchmarkRebuildCatalog200PrefixedServers(b *testing.B) {
	g, _ := listingGateway(b, 200, 5, true)
	b.ReportAllocs()
	for b.Loop() {
		g.rebuildCatalog()
	}
}
