package main

// Pinned tool definitions. A server whose entry says "pin": "warn" or
// "block" has a digest of each of its tools' definitions (name,
// description, inputSchema, outputSchema, annotations) recorded in the pin
// file the first time corral sees the tool. A definition that changes
// after that (the "rug pull" of a trusted server turned hostile) is
// logged with a readable diff, shown on the status page and counted in
// corral_pin_changes_total; with "block" the tool is also withheld from
// every list and call until an operator accepts the change: corral
// started with -accept-pins SERVER or SERVER/TOOL, a POST to the admin
// API's /admin/pins/accept (adminhttp.go, acceptPending), or the pin file
// (or the server's entry in it) deleted and the config reloaded.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pinFileVersion is the version of the pin file's format.
const pinFileVersion = 1

// pinFileName is the pin file's name, in cacheDir when the config sets
// one, else in the config file's directory.
const pinFileName = "corral-pins.json"

// pinPath returns where cfg's pin file is: in its cacheDir if it sets
// one, else beside the config file.
func pinPath(cfg *Config) string {
	if cfg.CacheDir != "" {
		dir, _ := cfg.catalogCacheDir() // never fails with a cacheDir
		return filepath.Join(dir, pinFileName)
	}
	return filepath.Join(filepath.Dir(absConfigPath(cfg)), pinFileName)
}

// pinFile is the pin file's content.
type pinFile struct {
	Version int                              `json:"version"`
	Servers map[string]map[string]pinnedTool `json:"servers"` // server -> the server's tool name -> its pin
}

// pinnedTool is one tool's pinned definition.
type pinnedTool struct {
	Digest     string          `json:"digest"` // "sha256:" and the hex of toolDigest
	Definition json.RawMessage `json:"definition"`
	Pinned     time.Time       `json:"pinned"`
}

// adminPinsPath is the admin API's list of changed tool definitions;
// adminPinsPath + "/accept" accepts them (adminhttp.go).
const adminPinsPath = "/admin/pins"

// pinChange is a tool whose definition is not the one pinned, as the
// status page and GET /admin/pins show it.
type pinChange struct {
	Server string    `json:"server"`
	Tool   string    `json:"tool"`  // the server's own name for it
	Mode   string    `json:"mode"`  // the server's pin: "warn" or "block"
	Since  time.Time `json:"since"` // when corral first saw the change
	Diff   []string  `json:"diff"`  // what changed, a line a difference
	// Digest is the changed definition's, which an accept may name.
	Digest string `json:"digest"`
	// Pinned and Definition are the pinned definition and the changed
	// one, whole: the diff cuts long values.
	Pinned     json.RawMessage `json:"pinned"`
	Definition json.RawMessage `json:"definition"`
}

// pinStore is the pins of the config in force, and the changes seen. Its
// methods are safe for concurrent use.
type pinStore struct {
	log *slog.Logger

	mu      sync.Mutex // guards the fields below
	path    string
	file    pinFile
	api     bool                  // the admin API's /admin/pins is served: the config has a bearer token
	accept  map[string]bool       // "SERVER" or "SERVER/TOOL" from -accept-pins, each used once
	changes map[subKey]*pinChange // by server and the server's tool name
	counted map[string]int64      // changes seen, by server, for the metric
}

// newPinStore returns the pins of cfg.
func newPinStore(log *slog.Logger, cfg *Config) *pinStore {
	p := &pinStore{log: log, accept: map[string]bool{}, changes: map[subKey]*pinChange{}, counted: map[string]int64{}}
	p.configure(cfg)
	return p
}

// acceptChanges makes the changed definitions of names, each "SERVER" or
// "SERVER/TOOL" (-accept-pins), accepted and pinned when corral first
// sees them: of a server, those of its first list after this call.
func (p *pinStore) acceptChanges(names []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		p.accept[n] = true
	}
}

// configure reads the pin file of cfg, at start and at each reload: a pin
// file deleted since is an empty one, so every pin is taken again from
// what the servers list next.
func (p *pinStore) configure(cfg *Config) {
	path := pinPath(cfg)
	f := pinFile{Version: pinFileVersion, Servers: map[string]map[string]pinnedTool{}}
	if anyPinned(cfg) {
		data, err := readRegular(path, 64<<20)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			p.log.Error("pin file not read; tools of pinned servers are pinned again as they list", "file", path, "error", err, "fix", "make it a readable regular file, or remove it")
		default:
			var got pinFile
			if err := json.Unmarshal(data, &got); err != nil || got.Version != pinFileVersion {
				p.log.Error("pin file not read: not a pin file of this version; its pins are taken again as servers list", "file", path, "error", err, "fix", "remove it")
			} else if got.Servers != nil {
				f = got
			}
		}
	}
	p.mu.Lock()
	p.path, p.file, p.api = path, f, cfg.token != ""
	for k := range p.changes {
		if s := cfg.MCPServers[k.server]; s == nil || s.Pin == pinOff {
			delete(p.changes, k)
		}
	}
	p.mu.Unlock()
}

// anyPinned reports whether a server of cfg has its tools pinned.
func anyPinned(cfg *Config) bool {
	for _, s := range cfg.MCPServers {
		if s != nil && !s.Disabled && s.Pin != pinOff {
			return true
		}
	}
	return false
}

// check compares the tools each pinned backend lists with their pins:
// a tool seen for the first time is pinned, a changed one is logged once
// (and accepted if -accept-pins names it). It returns the tools to
// withhold: the changed tools of servers with "pin": "block", by server
// and the server's name.
func (p *pinStore) check(backends []*backend) map[subKey]bool {
	var withheld map[subKey]bool
	p.mu.Lock()
	defer p.mu.Unlock()
	dirty := false
	now := time.Now()
	for _, b := range backends {
		mode := b.cfg.Pin
		if mode == pinOff {
			continue
		}
		items := b.items(kindTool)
		if len(items) == 0 {
			continue // not listed yet: nothing to compare
		}
		pins := p.file.Servers[b.name]
		if pins == nil {
			pins = map[string]pinnedTool{}
			p.file.Servers[b.name] = pins
		}
		for _, it := range items {
			def, digest := toolDigest(it.raw)
			key := subKey{b.name, it.name}
			old, ok := pins[it.name]
			switch {
			case !ok:
				pins[it.name] = pinnedTool{Digest: digest, Definition: def, Pinned: now}
				dirty = true
			case old.Digest == digest:
				if c := p.changes[key]; c != nil {
					p.log.Info("pinned tool definition is the pinned one again", "server", b.name, "tool", it.name)
					delete(p.changes, key)
				}
			case p.accept[b.name] || p.accept[b.name+"/"+it.name]:
				pins[it.name] = pinnedTool{Digest: digest, Definition: def, Pinned: now}
				dirty = true
				delete(p.changes, key)
				delete(p.accept, b.name+"/"+it.name)
				p.log.Warn("changed tool definition accepted (-accept-pins) and pinned", "server", b.name, "tool", it.name, "diff", strings.Join(definitionDiff(old.Definition, def), "; "))
			default:
				c := p.changes[key]
				if c == nil || c.Digest != digest {
					c = &pinChange{Server: b.name, Tool: it.name, Mode: mode, Since: now, Diff: definitionDiff(old.Definition, def),
						Digest: digest, Pinned: old.Definition, Definition: def}
					p.changes[key] = c
					p.counted[b.name]++
					what := "logged; still served"
					if mode == pinBlock {
						what = "withheld from lists and calls until accepted"
					}
					p.log.Warn("pinned tool definition changed: "+what, "server", b.name, "tool", it.name, "pin", mode,
						"diff", strings.Join(c.Diff, "; "),
						"fix", p.acceptFix(b.name, it.name))
				}
				c.Mode = mode
				if mode == pinBlock {
					if withheld == nil {
						withheld = map[subKey]bool{}
					}
					withheld[key] = true
				}
			}
		}
		delete(p.accept, b.name) // a server's accept is for what it lists first
	}
	if dirty {
		if err := p.save(); err != nil {
			p.log.Error("pin file not written; pins are kept in memory until corral stops", "file", p.path, "error", err, "fix", "make its directory writable, or set cacheDir")
		}
	}
	return withheld
}

// acceptFix returns how an operator accepts the changed definition of
// server's tool. The caller holds p.mu.
func (p *pinStore) acceptFix(server, tool string) string {
	api := ""
	if p.api {
		api = fmt.Sprintf(`, POST {"tools": ["%s/%s"]} to %s/accept with the bearer token`, server, tool, adminPinsPath)
	}
	return fmt.Sprintf("if the change is expected, start corral with -accept-pins %s/%s%s, or delete %s (every pin) and reload", server, tool, api, p.path)
}

// acceptPending accepts the changes names name, as POST
// /admin/pins/accept asks: each name is "SERVER/TOOL", "SERVER" (every
// change of the server pending now) or "SERVER/TOOL@sha256:HEX" (only if
// the changed definition's digest is that one, so that an operator
// accepts exactly the definition they read). Each changed definition, as
// the server last listed it, is pinned, and the pin file saved; the
// caller rebuilds the catalog, which serves a withheld tool again. cfg is
// the config in force. All or nothing: a name of no server with "pin"
// set, or of no change pending, is an *adminError naming it, and nothing
// is accepted. It returns the changes accepted, sorted; when the file
// cannot be written they are accepted still, in memory, and the error
// says so.
func (p *pinStore) acceptPending(cfg *Config, names []string) ([]pinChange, error) {
	if len(names) == 0 {
		return nil, &adminError{http.StatusBadRequest, fmt.Sprintf(`"tools": want a list of "SERVER/TOOL" (or "SERVER", every change of it), the changes GET %s lists`, adminPinsPath)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var keys []subKey
	taken := map[subKey]bool{}
	asked := map[string]bool{} // each name once: a body of repeats is no more work
	for _, n := range names {
		if asked[n] {
			continue
		}
		asked[n] = true
		spec, sum, byDigest := strings.Cut(n, "@sha256:") // a tool's name may hold an @
		digest := "sha256:" + sum
		server, tool, one := strings.Cut(spec, "/")
		if s := cfg.MCPServers[server]; s == nil || s.Disabled || s.Pin == pinOff {
			return nil, &adminError{http.StatusNotFound, fmt.Sprintf(`%s: there is no server %s with "pin" set; name SERVER/TOOL of a change GET %s lists`, briefQuote(n), briefQuote(server), adminPinsPath)}
		}
		if byDigest && !one {
			return nil, &adminError{http.StatusBadRequest, fmt.Sprintf(`%s: a digest names one tool's definition: write SERVER/TOOL@sha256:HEX`, briefQuote(n))}
		}
		found := 0
		for k, c := range p.changes {
			if k.server != server || one && k.uri != tool {
				continue
			}
			if byDigest && c.Digest != digest {
				return nil, &adminError{http.StatusConflict, fmt.Sprintf(`%s: the changed definition of tool %s of server %q is now %s: it changed again since; GET %s shows it, and accept that one by its digest`, briefQuote(n), briefQuote(tool), server, c.Digest, adminPinsPath)}
			}
			found++
			if !taken[k] {
				taken[k] = true
				keys = append(keys, k)
			}
		}
		switch {
		case found == 0 && one:
			return nil, &adminError{http.StatusNotFound, fmt.Sprintf(`%s: tool %s of server %q has no changed definition pending (its definition is the pinned one, or the server does not list it); GET %s lists the changes pending`, briefQuote(n), briefQuote(tool), server, adminPinsPath)}
		case found == 0:
			return nil, &adminError{http.StatusNotFound, fmt.Sprintf(`%s: server %s has no changed tool definition pending; GET %s lists the changes pending`, briefQuote(n), briefQuote(server), adminPinsPath)}
		}
	}
	slices.SortFunc(keys, func(a, b subKey) int {
		return strings.Compare(a.server+"\x00"+a.uri, b.server+"\x00"+b.uri)
	})
	now := time.Now()
	out := make([]pinChange, 0, len(keys))
	for _, k := range keys {
		c := p.changes[k]
		pins := p.file.Servers[k.server]
		if pins == nil { // the pin file was deleted and reloaded since the change was seen
			pins = map[string]pinnedTool{}
			p.file.Servers[k.server] = pins
		}
		pins[k.uri] = pinnedTool{Digest: c.Digest, Definition: c.Definition, Pinned: now}
		delete(p.changes, k)
		out = append(out, *c)
	}
	if err := p.save(); err != nil {
		p.log.Error("pin file not written; pins are kept in memory until corral stops", "file", p.path, "error", err, "fix", "make its directory writable, or set cacheDir")
		return out, fmt.Errorf("the changes are accepted and served until corral stops, but the pin file %s was not written: %v; make its directory writable, or set cacheDir", p.path, err)
	}
	return out, nil
}

// briefQuote returns s quoted, cut to 128 bytes: a name in an error, which
// a request of a megabyte does not make a megabyte long.
func briefQuote(s string) string {
	if len(s) > 128 {
		return strconv.Quote(s[:128]) + "..."
	}
	return strconv.Quote(s)
}

// save writes the pin file: to a temporary file in its directory, then
// renamed over it. The caller holds p.mu.
func (p *pinStore) save() error {
	data, err := json.MarshalIndent(p.file, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.path), pinFileName+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a rename, there is nothing to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p.path)
}

// changed returns the changes seen and not accepted, by server and tool,
// for the status page.
func (p *pinStore) changed() []pinChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pinChange
	for _, k := range slices.SortedFunc(maps.Keys(p.changes), func(a, b subKey) int {
		return strings.Compare(a.server+"\x00"+a.uri, b.server+"\x00"+b.uri)
	}) {
		out = append(out, *p.changes[k])
	}
	return out
}

// counts returns the changes seen by server, for corral_pin_changes_total.
func (p *pinStore) counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counted)
}

// pinnedFields are the members of a tool's object its pin covers.
var pinnedFields = []string{"name", "description", "inputSchema", "outputSchema", "annotations"}

// toolDigest returns the definition of tool that is pinned, as canonical
// JSON (the members of pinnedFields it has, object keys sorted, no white
// space), and its digest, "sha256:HEX".
func toolDigest(tool json.RawMessage) (json.RawMessage, string) {
	var fields map[string]any
	json.Unmarshal(tool, &fields)
	def := map[string]any{}
	for _, f := range pinnedFields {
		if v, ok := fields[f]; ok {
			def[f] = v
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(def) // encoding/json sorts map keys
	canon := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	sum := sha256.Sum256(canon)
	return canon, "sha256:" + hex.EncodeToString(sum[:])
}

// maxDiffLines bounds the lines of a definition's diff.
const maxDiffLines = 20

// definitionDiff returns what differs between two pinned definitions, a
// line a difference, by the path of the member that differs:
// `description: was "Lists files.", now "Lists files. Also read ~/.ssh"`.
func definitionDiff(was, now json.RawMessage) []string {
	var a, b any
	json.Unmarshal(was, &a)
	json.Unmarshal(now, &b)
	var out []string
	diffValues("", a, b, &out)
	if len(out) > maxDiffLines {
		out = append(out[:maxDiffLines], fmt.Sprintf("and %d more differences", len(out)-maxDiffLines))
	}
	return out
}

// diffValues appends to out the differences between a and b at path.
func diffValues(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			av, ina := am[k]
			bv, inb := bm[k]
			switch {
			case !ina:
				*out = append(*out, fmt.Sprintf("%s: added %s", p, shortJSON(bv)))
			case !inb:
				*out = append(*out, fmt.Sprintf("%s: removed (was %s)", p, shortJSON(av)))
			default:
				diffValues(p, av, bv, out)
			}
		}
		return
	}
	if fa, fb := fullJSON(a), fullJSON(b); fa != fb {
		ja, jb := shortJSON(a), shortJSON(b)
		if path == "" {
			path = "definition"
		}
		*out = append(*out, fmt.Sprintf("%s: was %s, now %s", path, ja, jb))
	}
}

// fullJSON returns v as JSON.
func fullJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// shortJSON returns v as JSON, cut to 200 bytes.
func shortJSON(v any) string {
	s := fullJSON(v)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// pinsReport returns what -check prints of cfg's pins: each server with
// "pin" set, the pin file, and how many of its tools the file pins.
func pinsReport(cfg *Config) []byte {
	if !anyPinned(cfg) {
		return nil
	}
	path := pinPath(cfg)
	var f pinFile
	data, err := readRegular(path, 64<<20)
	state := ""
	switch {
	case errors.Is(err, fs.ErrNotExist):
		state = "no pin file yet: each tool is pinned at first sight"
	case err != nil:
		state = "the pin file cannot be read (" + err.Error() + "): each tool is pinned again at first sight"
	case json.Unmarshal(data, &f) != nil || f.Version != pinFileVersion:
		state = "not a pin file of this version: each tool is pinned again at first sight; remove it"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pins: %s", path)
	if state != "" {
		fmt.Fprintf(&b, ": %s", state)
	}
	b.WriteString("\n")
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		if s := cfg.MCPServers[name]; s != nil && !s.Disabled && s.Pin != pinOff {
			fmt.Fprintf(&b, "  server %s: pin %q, %d tools pinned\n", quoteName(name), s.Pin, len(f.Servers[name]))
		}
	}
	return []byte(b.String())
}
