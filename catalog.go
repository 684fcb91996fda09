package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// uriSeparator joins a prefix (or, on a collision, a server's name) to a
// resource URI: "fs" and "file:///a" make "fs+file:///a". The result is still
// a URI, whose scheme is "fs+file", and a URI template stays a template.
const uriSeparator = "+"

// qualify returns the name clients see for an item of kind k that server
// qualifier q offers as name.
func qualify(k kind, q, name string) string {
	if k == kindResource || k == kindTemplate {
		if rest, ok := cutUIScheme(name); ok {
			// An MCP App's resource stays a ui:// URI a host renders:
			// "ui://fs+weather/view" is the server's "ui://weather/view".
			return uiScheme + q + uriSeparator + rest
		}
		return q + uriSeparator + name
	}
	return q + toolSeparator + name
}

// uiScheme begins the URIs of MCP Apps' resources (io.modelcontextprotocol/ui).
const uiScheme = "ui://"

// cutUIScheme returns uri without its "ui://", and whether it had one.
// Only the lowercase scheme, which MCP Apps write, is taken: qualify puts
// it back as it was.
func cutUIScheme(uri string) (string, bool) {
	return strings.CutPrefix(uri, uiScheme)
}

// unqualify returns the name that server qualifier q offers as name, a
// name of kind k as clients see it, if name is qualify(k, q, orig).
func unqualify(k kind, q, name string) (string, bool) {
	if k == kindResource || k == kindTemplate {
		if rest, ok := cutUIScheme(name); ok {
			if orig, ok := strings.CutPrefix(rest, q+uriSeparator); ok && orig != "" {
				return uiScheme + orig, true
			}
			return "", false
		}
		orig, ok := strings.CutPrefix(name, q+uriSeparator)
		return orig, ok && orig != ""
	}
	orig, ok := strings.CutPrefix(name, q+toolSeparator)
	return orig, ok && orig != ""
}

// unUI returns name, of kind k, without the "ui://" of a resource's URI:
// the part a qualifier begins, for namespaces.
func unUI(k kind, name string) string {
	if k == kindResource || k == kindTemplate {
		rest, _ := cutUIScheme(name)
		return rest
	}
	return name
}

// catalog is what clients see of every server's lists. It is immutable once
// built.
type catalog struct {
	lists [numKinds]catalogList
	// invalidTools says, for the log and -check, each tool left out
	// because its x-mcp-header annotations break the rules (see
	// toolParamHeaders), sorted.
	invalidTools []string
	// resourceNames are the names clients see of the resources in the
	// list, by server and the server's own URI (see clientURI).
	resourceNames map[subKey]string
	// overrideProblems are the parts of servers' toolOverrides that their
	// tools/list does not fit, which are not applied (overrides.go).
	overrideProblems []overrideProblem
	// overridden are the tools of each server with toolOverrides as they
	// make them, kept for the next rebuild while the server's list stays.
	overridden map[*backend]*overriddenList

	mu    sync.Mutex                       // guards views, a leaf
	views map[*view]*[numKinds]catalogList // the lists of each view that asked, built once
}

// listsFor returns the lists that view v sees: every list for a nil view,
// else the items v sees of each, built the first time v asks and kept with
// the catalog, which is never changed once built. It is safe for
// concurrent use.
func (c *catalog) listsFor(v *view) *[numKinds]catalogList {
	if v == nil {
		return &c.lists
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.views[v]; l != nil {
		return l
	}
	l := new([numKinds]catalogList)
	for k := range numKinds {
		for _, it := range c.lists[k].items {
			if v.sees(k, it.backend.name, it.orig, it.src) {
				l[k].items = append(l[k].items, it)
			}
		}
		l[k].byName = make(map[string]*catalogItem, len(l[k].items))
		for i := range l[k].items {
			l[k].byName[l[k].items[i].name] = &l[k].items[i]
		}
	}
	if c.views == nil {
		c.views = map[*view]*[numKinds]catalogList{}
	}
	c.views[v] = l
	return l
}

// inView reports whether the list of kind k that view v sees holds name, a
// name as clients see it: from the lists listsFor keeps, so that asking
// costs a map lookup, not the view's matching again.
func (c *catalog) inView(v *view, k kind, name string) bool {
	return v == nil || c.listsFor(v)[k].byName[name] != nil
}

// catalogList is the aggregated list of one kind, sorted by name.
type catalogList struct {
	items  []catalogItem
	byName map[string]*catalogItem
	// headers are the x-mcp-header annotations of the tools that have
	// them (toolParamHeaders), by name as clients see it, read once when
	// the catalog is built (a renamed tool keeps them); nil in a view's
	// lists (see listsFor), and when no tool has any.
	headers map[string][]paramHeader
}

// catalogItem is one item as clients see it.
type catalogItem struct {
	name    string          // the name (or URI) clients use
	orig    string          // the backend's name for it
	backend *backend        // never nil
	raw     json.RawMessage // the object, renamed when name != orig
	src     json.RawMessage // the object as the server sent it
	// fixed are the arguments corral sets on a call of the tool, from its
	// server's toolOverrides; nil for most.
	fixed map[string]json.RawMessage
}

func (c *catalog) lookup(k kind, name string) *catalogItem {
	return c.lists[k].byName[name]
}

// buildCatalog names every item of every backend. An item keeps its own name
// unless its server has a prefix (then "prefix__name", or "prefix+uri"), or
// another server without a prefix offers an item of the same kind and name:
// then each of the colliding items is qualified by its server's name, so that
// no request can reach the wrong server. A name in a prefix's namespace
// ("prefix__" or "prefix+") belongs to that prefix's server alone: an item of
// another server whose name falls there is qualified by its server's name
// or, if that still falls there or is taken, left out. Tools the server's
// filter leaves out are not in the catalog. It returns the collisions, for
// the log.
func buildCatalog(backends []*backend) (*catalog, []string) {
	return rebuildFrom(nil, backends, nil)
}

// rebuildFrom is buildCatalog where old, if not nil, is a catalog built
// before: an item renamed in old whose server sent the same object again
// keeps old's renamed object, so that a rebuild costs the work of what
// changed, not a JSON round trip for every item of every prefixed server.
//
// A tool in withheld, by its server and the server's name for it (a
// changed definition of a server with "pin": "block", see pins.go), is
// left out.
func rebuildFrom(old *catalog, backends []*backend, withheld map[subKey]bool) (*catalog, []string) {
	cat := &catalog{}
	for _, b := range backends {
		if len(b.cfg.ToolOverrides) == 0 {
			continue
		}
		if cat.overridden == nil {
			cat.overridden = map[*backend]*overriddenList{}
		}
		o := overrideList(old, b)
		cat.overridden[b] = o
		cat.overrideProblems = append(cat.overrideProblems, o.problems...)
	}
	ns := newNamespaces(backends)
	var collisions []string
	for k := range numKinds {
		var c []string
		var prev *catalogList
		if old != nil {
			prev = &old.lists[k]
		}
		var bad []string
		cat.lists[k], c, bad = buildList(backends, k, ns, prev, withheld, cat.overridden)
		collisions = append(collisions, c...)
		cat.invalidTools = append(cat.invalidTools, bad...)
	}
	cat.resourceNames = make(map[subKey]string, len(cat.lists[kindResource].items))
	for _, it := range cat.lists[kindResource].items {
		cat.resourceNames[subKey{it.backend.name, it.orig}] = it.name
	}
	cat.rewriteUIRefs(backends)
	return cat, collisions
}

// namespace returns the prefix whose namespace holds name, an item of kind
// k as clients see it, or "" if none does. Where the namespaces of two
// prefixes nest ("a__" holds "a__b__"), the longer one's holds it.
func namespace(backends []*backend, k kind, name string) string {
	owner := ""
	name = unUI(k, name)
	for _, b := range backends {
		p := b.cfg.Prefix
		if p != "" && len(p) > len(owner) && strings.HasPrefix(name, unUI(k, qualify(k, p, ""))) {
			owner = p
		}
	}
	return owner
}

// namespaces answers namespace for one set of backends in time that grows
// with the name's length, not with the number of servers: a catalog's build
// asks it for every item.
type namespaces map[string]bool // the servers' prefixes

func newNamespaces(backends []*backend) namespaces {
	ns := namespaces{}
	for _, b := range backends {
		if b.cfg.Prefix != "" {
			ns[b.cfg.Prefix] = true
		}
	}
	return ns
}

// of returns namespace(backends, k, name) for the backends ns was made of.
func (ns namespaces) of(k kind, name string) string {
	if len(ns) == 0 {
		return ""
	}
	sep := toolSeparator
	if k == kindResource || k == kindTemplate {
		sep = uriSeparator
		name = unUI(k, name)
	}
	owner := ""
	for i := 1; i+len(sep) <= len(name); i++ {
		if i > len(owner) && name[i:i+len(sep)] == sep && ns[name[:i]] {
			owner = name[:i]
		}
	}
	return owner
}

// listEntry is an item of a server as buildList places it.
type listEntry struct {
	b     *backend
	it    backendItem
	name  string
	base  string          // the name before any qualifier: the server's, or its override's
	obj   json.RawMessage // the object named base
	fixed map[string]json.RawMessage
	// headers are the tool's x-mcp-header annotations, as clients see
	// its schema (see toolParamHeaders).
	headers []paramHeader
}

// buildList builds the list of kind k (see buildCatalog); prev, if not nil,
// is the same list of a catalog built before, whose renamed objects it
// reuses. It returns the collisions, and the tools it left out for invalid
// x-mcp-header annotations (see invalidToolLine).
func buildList(backends []*backend, k kind, ns namespaces, prev *catalogList, withheld map[subKey]bool, overridden map[*backend]*overriddenList) (catalogList, []string, []string) {
	what := strings.TrimSuffix(kinds[k].field, "s")
	entries, owners, collisions, invalid := listEntries(backends, k, ns, withheld, overridden)
	collisions = append(collisions, sharedNameCollisions(backends, k, owners)...)
	sort.Strings(collisions)
	l := catalogList{byName: make(map[string]*catalogItem, len(entries))}
	for _, e := range entries {
		if e.b.cfg.Prefix == "" && !e.b.cfg.NoPrefix && len(owners[e.name]) > 1 {
			e.name = qualify(k, e.b.name, e.base)
		}
		if p := ns.of(k, e.name); p != e.b.cfg.Prefix {
			collisions = append(collisions, fmt.Sprintf("%s %q of server %q is left out: %q is in the namespace of prefix %q, which only that prefix's server may use", what, e.it.name, e.b.name, e.name, p))
			continue
		}
		if _, dup := l.byName[e.name]; dup {
			collisions = append(collisions, fmt.Sprintf("%s %q of server %q is left out: the name is taken", what, e.name, e.b.name))
			continue
		}
		raw := e.obj
		if e.name != e.base {
			raw = renamed(prev, e.b, e.it, e.name)
			if raw == nil {
				raw = rename(e.obj, kinds[k].key, e.name)
			}
		}
		l.items = append(l.items, catalogItem{name: e.name, orig: e.it.name, backend: e.b, raw: raw, src: e.it.raw, fixed: e.fixed})
		if e.headers != nil {
			if l.headers == nil {
				l.headers = map[string][]paramHeader{}
			}
			l.headers[e.name] = e.headers
		}
		l.byName[e.name] = nil
	}
	sort.Slice(l.items, func(i, j int) bool { return l.items[i].name < l.items[j].name })
	for i := range l.items {
		l.byName[l.items[i].name] = &l.items[i]
	}
	sort.Strings(invalid)
	return l, collisions, invalid
}

// listEntries returns the items of kind k that backends offer, as their
// filters, withheld (pins.go) and overrides leave them, each named as its
// server's prefix or the namespaces of ns place it; owners, the servers
// offering each plain name without a prefix; the items placed outside a
// prefix's namespace, as collisions; and the tools left out for invalid
// x-mcp-header annotations.
func listEntries(backends []*backend, k kind, ns namespaces, withheld map[subKey]bool, overridden map[*backend]*overriddenList) (entries []listEntry, owners map[string][]string, collisions, invalid []string) {
	what := strings.TrimSuffix(kinds[k].field, "s")
	owners = map[string][]string{}
	for _, b := range backends {
		items := b.items(k)
		var over []overriddenTool
		if o := overridden[b]; o != nil && k == kindTool {
			items, over = o.items, o.out // the list the overrides were applied to
		}
		for i, it := range items {
			if k == kindTool && (!b.cfg.Tools.allows(it.name) || withheld[subKey{b.name, it.name}]) {
				continue
			}
			e := listEntry{b: b, it: it, base: it.name, obj: it.raw}
			if over != nil {
				if over[i].hidden {
					continue
				}
				e.base, e.obj, e.fixed = over[i].name, over[i].raw, over[i].fixed
			}
			e.name = e.base
			if k == kindTool {
				// "Clients using the Streamable HTTP transport MUST reject
				// tool definitions where any x-mcp-header value violates
				// these constraints. Rejection means the client MUST exclude
				// the invalid tool from the result of tools/list." corral
				// serves HTTP clients whatever its servers' transports. The
				// definition checked is the one clients see: a fixed
				// argument's annotation is gone with its parameter.
				hs, err := toolParamHeaders(e.obj)
				if err != nil {
					invalid = append(invalid, invalidToolLine(b.name, it.name, err))
					continue
				}
				e.headers = hs
			}
			switch {
			case b.cfg.Prefix != "":
				e.name = qualify(k, b.cfg.Prefix, e.base)
			case b.cfg.NoPrefix:
				owners[e.name] = append(owners[e.name], b.name)
			case ns.of(k, e.name) != "":
				e.name = qualify(k, b.name, e.base)
				collisions = append(collisions, fmt.Sprintf("server %q offers %s %q, a name in the namespace of prefix %q, which only that prefix's server may use; it is offered as %q", b.name, what, e.base, ns.of(k, e.base), e.name))
			default:
				owners[e.name] = append(owners[e.name], b.name)
			}
			entries = append(entries, e)
		}
	}
	return entries, owners, collisions, invalid
}

// sharedNameCollisions says, of each plain name that several servers
// offer without a prefix (owners, see listEntries), how each is offered
// instead: qualified by its server's name, or, for a server whose prefix
// is false, under the name itself.
func sharedNameCollisions(backends []*backend, k kind, owners map[string][]string) []string {
	what := strings.TrimSuffix(kinds[k].field, "s")
	noPrefix := map[string]bool{}
	for _, b := range backends {
		noPrefix[b.name] = b.cfg.NoPrefix
	}
	var collisions []string
	for name, servers := range owners {
		if len(servers) > 1 {
			var qualified []string
			for _, s := range servers {
				if noPrefix[s] {
					qualified = append(qualified, fmt.Sprintf("%q (server %q, whose prefix is false)", name, s))
				} else {
					qualified = append(qualified, fmt.Sprintf("%q", qualify(k, s, name)))
				}
			}
			collisions = append(collisions, fmt.Sprintf("servers %q all offer %s %q; it is offered as %s", servers, what, name, strings.Join(qualified, ", ")))
		}
	}
	return collisions
}

// renamed returns the object prev holds for item it of server b named name,
// or nil if prev has none or the server sent another object since.
func renamed(prev *catalogList, b *backend, it backendItem, name string) json.RawMessage {
	if prev == nil {
		return nil
	}
	o := prev.byName[name]
	if o == nil || o.backend != b || o.orig != it.name || !bytes.Equal(o.src, it.raw) {
		return nil
	}
	return o.raw
}

// rename returns the object raw with its member key set to name.
func rename(raw json.RawMessage, key, name string) json.RawMessage {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return raw // listItems checked it is an object
	}
	fields[key], _ = json.Marshal(name)
	out, _ := json.Marshal(fields)
	return out
}

// sameList reports whether two lists look the same to clients.
func sameList(a, b catalogList) bool {
	return slices.EqualFunc(a.items, b.items, func(x, y catalogItem) bool {
		return x.name == y.name && x.backend == y.backend && bytes.Equal(x.raw, y.raw)
	})
}

// page returns the result of a list request for kind k, of the items view
// v sees (see listsFor): the items after the
// cursor, at most size of them, and meta, if not nil, as its _meta. The
// cursor is the last name sent, so that a page boundary survives a change
// of the list between pages. The result is written in one buffer of its
// exact size from each item's JSON as the catalog holds it: nothing of the
// catalog is copied or encoded again but the page's own bytes.
func (c *catalog) page(v *view, k kind, params json.RawMessage, size int, meta json.RawMessage) (json.RawMessage, error) {
	method := kinds[k].list
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: method + ": invalid params: " + err.Error()}
		}
	}
	after := ""
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || len(b) == 0 {
			return nil, &wireError{Code: codeInvalidParams, Message: method + ": invalid cursor"}
		}
		after = string(b)
	}
	items := c.listsFor(v)[k].items
	i := sort.Search(len(items), func(i int) bool { return items[i].name > after })
	end := min(i+size, len(items))
	next := ""
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte(items[end-1].name))
	}
	n := len(kinds[k].field) + len(`{"":[]}`) + len(`,"nextCursor":""`) + len(next) + len(`,"_meta":`) + len(meta)
	for _, it := range items[i:end] {
		n += len(it.raw) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, `{"`+kinds[k].field+`":[`...)
	for j, it := range items[i:end] {
		if j > 0 {
			out = append(out, ',')
		}
		out = append(out, it.raw...)
	}
	out = append(out, ']')
	if next != "" {
		out = append(out, `,"nextCursor":"`+next+`"`...) // base64 needs no escaping
	}
	if meta != nil {
		out = append(out, `,"_meta":`...)
		out = append(out, meta...)
	}
	return append(out, '}'), nil
}

// resolveURI finds the server that serves a resource URI as clients see it,
// and the server's own URI for it, within view v (nil: every server):
//
//  1. a URI in the aggregated resource list;
//  2. a URI that a template in the aggregated list matches (by its text up
//     to the first variable; the longest such match wins);
//  3. "q+uri", where q is a server's prefix or name: that server's "uri";
//  4. any URI, when only one server offers resources.
//
// Only the lists, templates and servers v sees take part, and the URI
// found must be one v sees. A URI in a prefix's namespace ("prefix+") goes
// to that prefix's server or nowhere: no other server's template or name
// takes it. It returns nil when none applies.
func (c *catalog) resolveURI(v *view, backends []*backend, uri string) (*backend, string) {
	lists := c.listsFor(v)
	if it := lists[kindResource].byName[uri]; it != nil {
		return it.backend, it.orig
	}
	b, orig := resolveUnlisted(lists, v, backends, uri)
	if b == nil || !v.sees(kindResource, b.name, orig, nil) {
		return nil, ""
	}
	return b, orig
}

// resolveUnlisted is resolveURI's steps 2 to 4, over the lists of view v.
func resolveUnlisted(lists *[numKinds]catalogList, v *view, backends []*backend, uri string) (*backend, string) {
	ns := namespace(backends, kindResource, uri)
	var best *catalogItem
	bestLen := -1
	for i := range lists[kindTemplate].items {
		it := &lists[kindTemplate].items[i]
		lit, _, _ := strings.Cut(it.name, "{")
		if lit != "" && strings.HasPrefix(uri, lit) && len(lit) > bestLen && (ns == "" || it.backend.cfg.Prefix == ns) {
			best, bestLen = it, len(lit)
		}
	}
	if best != nil {
		// The visible template is the server's, maybe qualified.
		if best.name == best.orig {
			return best.backend, uri
		}
		q := cmpOr(best.backend.cfg.Prefix, best.backend.name)
		if orig, ok := unqualify(kindResource, q, uri); ok {
			return best.backend, orig
		}
		return nil, ""
	}
	var offering []*backend
	for _, b := range backends {
		if !v.seesServer(b.name) {
			continue
		}
		q := b.cfg.Prefix
		if q == "" {
			q = b.name
		}
		if rest, ok := unqualify(kindResource, q, uri); ok && (ns == "" || b.cfg.Prefix == ns) {
			return b, rest
		}
		if b.capabilities().has(kindResource) {
			offering = append(offering, b)
		}
	}
	if len(offering) == 1 && offering[0].cfg.Prefix == "" && ns == "" {
		return offering[0], uri
	}
	return nil, ""
}

// seesTool reports whether view v may call the tool of server that its
// client calls tool ("" for a task of another method: any of the
// server's), in catalog c.
func (c *catalog) seesTool(v *view, server, tool string) bool {
	if v == nil {
		return true
	}
	if tool == "" {
		return v.seesServer(server)
	}
	it := c.listsFor(v)[kindTool].byName[tool]
	return it != nil && it.backend.name == server
}
