package main

// This file holds the catalog cache: what a lazy server offers, kept on
// disk between runs of corral, so that its tools, prompts and resources are
// listed before it is started.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// catalogCacheVersion is the version of the cache file's format; a file of
// another version is ignored and written again.
const catalogCacheVersion = 1

// cachedCatalog is the content of a cache file.
type cachedCatalog struct {
	Version      int                          `json:"version"`
	Server       string                       `json:"server"`           // for people reading the directory
	Config       string                       `json:"config,omitempty"` // the absolute path of the config that wrote it, for sweepCatalogCache
	Capabilities capabilities                 `json:"capabilities"`
	Instructions string                       `json:"instructions,omitempty"`
	Lists        map[string][]json.RawMessage `json:"lists"` // by kinds[k].field
}

// catalogCache is the cache file of one server, named by the server's name
// and a hash of everything in its config that can change its catalog. Its
// methods are safe for concurrent use.
type catalogCache struct {
	dir, server, path string
	config            string // the config file's absolute path, for cachedCatalog.Config
	maxItems          int    // the server's maxCatalogItems
	maxBytes          int64  // the server's maxCatalogBytes

	mu    sync.Mutex // orders writes
	saved []byte     // what was last written or read, to skip writing it again
}

// newCatalogCache returns the cache of server cfg of config gcfg in dir.
// Reading a server's catalog without running it is newCatalogCache(...).load
// and upstream.restore.
func newCatalogCache(dir string, gcfg *Config, cfg *ServerConfig) *catalogCache {
	items, size := gcfg.catalogBound(cfg)
	return &catalogCache{dir: dir, server: cfg.Name(), path: filepath.Join(dir, cfg.Name()+"-"+catalogKey(gcfg, cfg)+".json"),
		config: absConfigPath(gcfg), maxItems: items, maxBytes: size}
}

// catalogKey returns a hash of what can change server cfg's catalog: how it
// is run (command, args, env, cwd) or reached (url, headers). Secrets in env
// and headers go into the hash only, never into a file.
func catalogKey(gcfg *Config, cfg *ServerConfig) string {
	cwd := cfg.Cwd
	if cwd != "" && !filepath.IsAbs(cwd) && gcfg.file != "" {
		cwd = filepath.Join(filepath.Dir(gcfg.file), cwd)
	}
	data, _ := json.Marshal(struct {
		V                 int
		Command, Cwd, URL string
		Args              []string
		Env, Headers      map[string]string // encoding/json sorts map keys
	}{catalogCacheVersion, cfg.Command, cwd, cfg.URL, cfg.Args, cfg.Env, cfg.Headers})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// load reads the cache file and checks it against the server's catalog
// bounds. It returns an error wrapping fs.ErrNotExist when there is none
// yet, and another error when it cannot be used as it is, such as what is
// not a regular file (which it never waits on; see readRegular): save
// then renames a file over it.
func (c *catalogCache) load() (*cachedCatalog, error) {
	// The JSON of the items, escaped at worst, and room for the rest.
	limit := 2*c.maxBytes + 1<<20
	data, err := readRegular(c.path, limit) // a FIFO put there must not hang corral
	switch {
	case errors.Is(err, errTooLarge):
		return nil, fmt.Errorf("larger than %d bytes (maxCatalogBytes)", limit)
	case err != nil:
		return nil, err
	}
	var cc cachedCatalog
	if err := json.Unmarshal(data, &cc); err != nil {
		return nil, fmt.Errorf("not a catalog: %v", err)
	}
	if cc.Version != catalogCacheVersion || cc.Server != c.server {
		return nil, fmt.Errorf("version %d of server %q, not version %d of %q", cc.Version, cc.Server, catalogCacheVersion, c.server)
	}
	bound := &catalogBound{server: c.server, maxItems: c.maxItems, maxBytes: c.maxBytes}
	for k := range numKinds {
		for _, raw := range cc.Lists[kinds[k].field] {
			if _, err := itemName(k, raw); err != nil {
				return nil, err
			}
			if err := bound.add(raw); err != nil {
				return nil, err
			}
		}
	}
	c.mu.Lock()
	c.saved = data
	c.mu.Unlock()
	return &cc, nil
}

// itemName returns the name (or URI) of raw, an item of kind k.
func itemName(k kind, raw json.RawMessage) (string, error) {
	var fields map[string]json.RawMessage
	var name string
	if json.Unmarshal(raw, &fields) != nil || json.Unmarshal(fields[kinds[k].key], &name) != nil || name == "" {
		return "", fmt.Errorf("an item without a %s: %s", kinds[k].key, truncate(raw, 200))
	}
	return name, nil
}

// save writes cc as the cache file, unless the file already holds it:
// to a temporary file in the same directory, synced, then renamed over the
// old one, so that a reader sees the old file or the new one, never a part.
// Files of the server's older configs are removed. It blocks until done.
func (c *catalogCache) save(cc *cachedCatalog) error {
	cc.Config = c.config
	data, err := json.Marshal(cc)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(data, c.saved) {
		return nil
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.dir, ".catalog-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, this finds nothing
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), c.path)
	}
	if err != nil {
		return err
	}
	if d, err := os.Open(c.dir); err == nil {
		d.Sync() // the rename itself survives a crash
		d.Close()
	}
	c.saved = data
	c.removeOld()
	return nil
}

// removeOld removes the cache files of the server's older configs: one
// file per server is all the directory holds.
func (c *catalogCache) removeOld() {
	files, _ := filepath.Glob(filepath.Join(c.dir, c.server+"-*.json"))
	for _, f := range files {
		if server, ok := cacheFileServer(filepath.Base(f)); ok && server == c.server && f != c.path {
			os.Remove(f)
		}
	}
}

// cacheFileServer returns the server name in name, the base name of a
// file in the cache directory, and reports whether name is that of a cache
// file: NAME-HASH.json, HASH being 32 lowercase hexadecimal digits.
func cacheFileServer(name string) (string, bool) {
	rest, ok := strings.CutSuffix(name, ".json")
	if !ok || len(rest) < 34 || rest[len(rest)-33] != '-' {
		return "", false
	}
	key := rest[len(rest)-32:]
	if strings.Trim(key, "0123456789abcdef") != "" {
		return "", false
	}
	return rest[:len(rest)-33], true
}

// absConfigPath returns the absolute path of cfg's file, or "" for a
// config read from no file.
func absConfigPath(cfg *Config) string {
	if cfg.file == "" {
		return ""
	}
	abs, err := filepath.Abs(cfg.file)
	if err != nil {
		return ""
	}
	return abs
}

// sweepCatalogCache removes the cache files of config cfg's servers that
// are gone: the files in its cache directory, named as corral names them,
// of a server that is not a lazy server of cfg, and written for cfg's file
// (cachedCatalog.Config): configs run by other corral processes may share
// the directory, and their files are left alone, as are files it cannot
// read or parse. It returns the paths it removed; it blocks until done.
// The gateway calls it at start and after each reload, once the servers
// the reload removed are stopped.
func sweepCatalogCache(cfg *Config) []string {
	dir, err := cfg.catalogCacheDir()
	config := absConfigPath(cfg)
	if err != nil || config == "" {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	_, size := cfg.catalogBound(&ServerConfig{}) // a gone server's own bound is gone with it
	var removed []string
	for _, e := range entries {
		server, ok := cacheFileServer(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if s := cfg.MCPServers[server]; s != nil && s.isLazy() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := readRegular(path, 2*size+1<<20)
		var cc cachedCatalog
		if err != nil || json.Unmarshal(data, &cc) != nil || cc.Config != config || cc.Server != server {
			continue
		}
		if os.Remove(path) == nil {
			removed = append(removed, path)
		}
	}
	return removed
}

// catalogSource says where a server's catalog comes from, for the log.
func catalogSource(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no catalog cache yet"
	}
	return "catalog cache ignored"
}

// cachedItems returns what Config.profilesReport asks of cfg's servers'
// items: the names a server listed of a kind (by its list's field) as its
// catalog cache file holds them, and whether there is one (a lazy server
// that has run once); -check runs no server.
func cachedItems(cfg *Config) func(server, field string) ([]string, bool) {
	lists := cachedLists(cfg)
	return func(server, field string) ([]string, bool) {
		l, ok := lists(server)
		if !ok {
			return nil, false
		}
		var names []string
		for k := range numKinds {
			if kinds[k].field != field {
				continue
			}
			for _, raw := range l[field] {
				if name, err := itemName(k, raw); err == nil {
					names = append(names, name)
				}
			}
		}
		return names, true
	}
}

// cachedLists returns the lists of server of cfg, by their field, as its
// catalog cache file holds them, and whether it has one that loads: what
// -check knows of a server's items, since it runs no server.
func cachedLists(cfg *Config) func(server string) (map[string][]json.RawMessage, bool) {
	dir, err := cfg.catalogCacheDir()
	return func(server string) (map[string][]json.RawMessage, bool) {
		s := cfg.MCPServers[server]
		if err != nil || s == nil {
			return nil, false
		}
		cc, err := newCatalogCache(dir, cfg, s).load()
		if err != nil {
			return nil, false
		}
		return cc.Lists, true
	}
}

// invalidToolsReport returns what -check prints of the tools that corral
// leaves out of its lists for their x-mcp-header annotations (see
// toolParamHeaders), as the servers' catalog cache files list them: a
// line for each, naming the server, the tool, why and the fix. Servers
// whose tools are not known yet (no cache file) have none.
func invalidToolsReport(cfg *Config) []byte {
	lists := cachedLists(cfg)
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		l, ok := lists(name)
		if !ok {
			continue
		}
		for _, raw := range l[kinds[kindTool].field] {
			tool, _ := itemName(kindTool, raw)
			if _, err := toolParamHeaders(raw); err != nil {
				fmt.Fprintln(&b, invalidToolLine(name, tool, err))
			}
		}
	}
	return []byte(b.String())
}

// cachedTools returns the tools server s of cfg listed when it last ran,
// as its catalog cache file holds them, and whether there is one: what
// -check checks toolOverrides against and reports the size of, since it
// runs no server.
func cachedTools(cfg *Config) func(server string) ([]backendItem, bool) {
	lists := cachedLists(cfg)
	return func(server string) ([]backendItem, bool) {
		l, ok := lists(server)
		if !ok {
			return nil, false
		}
		var items []backendItem
		for _, raw := range l[kinds[kindTool].field] {
			if name, err := itemName(kindTool, raw); err == nil {
				items = append(items, backendItem{name: name, raw: raw})
			}
		}
		return items, true
	}
}
