package main

// Search mode (docs/config.md, "Search mode"): a client whose toolMode is
// "search" lists two tools of corral's own instead of every tool of its
// view: find_tools, which ranks the tools of the view against a query and
// answers the best with their whole definitions, and call_tool, which calls
// one of them. call_tool is a tools/call of the tool it names: the route
// (Gateway.serve) rewrites it into one before anything else sees it, so the
// view, the client's limits, the audit trail and tasks treat it as that
// call. The ranking is BM25 over a tool's name, title, description, and its
// parameters' names and descriptions, with the server's name as a field of
// its own; it is lexical, deterministic, and needs no model and no network.
// A tool outside the view is not in its index: it cannot be found, and a
// call_tool naming it is answered as an unknown tool is.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
)

// The tools of search mode, and the bounds of find_tools' arguments.
const (
	findToolsName = "find_tools"
	callToolName  = "call_tool"
	// maxQueryBytes bounds find_tools' query: what a tool should do, in a
	// few words, needs far less.
	maxQueryBytes = 1024
	// maxFindLimit bounds find_tools' limit: past a few dozen definitions
	// the answer costs the context search mode is there to save.
	maxFindLimit     = 50
	defaultFindLimit = 5
)

// searchTools is what a client in search mode lists: find_tools and
// call_tool, as JSON objects of tools/list.
var searchTools = []json.RawMessage{
	json.RawMessage(`{"name":"find_tools","title":"Find tools","description":"Search the tools of every server behind this gateway by what you want to do, and get the best matches with their full definitions (name, description, input schema). Then call one with call_tool.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What you want to do, in a few words: \"read the last lines of a log file\"."},"limit":{"type":"integer","minimum":1,"maximum":50,"description":"How many tools to return, best first (default 5)."}},"required":["query"]}}`),
	json.RawMessage(`{"name":"call_tool","title":"Call a tool","description":"Call a tool that find_tools returned, by its name, with arguments that follow its input schema.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, as find_tools gave it."},"arguments":{"type":"object","description":"The tool's arguments."}},"required":["name"]}}`),
}

// maxFoundListed bounds the tools find_tools found that a session's
// tools/list shows after search mode's own: the last found.
const maxFoundListed = maxFindLimit

// foundInView returns the tools find_tools found for s that are still in
// v's view of cat, as tools/list lists them (see searchToolsPage).
func foundInView(cat *catalog, v *view, s *session) []json.RawMessage {
	var found []json.RawMessage
	listed := cat.listsFor(v)[kindTool].byName
	for _, name := range s.foundTools() {
		if it := listed[name]; it != nil && name != findToolsName && name != callToolName {
			found = append(found, it.raw)
		}
	}
	return found
}

// searchToolsPage returns the result of tools/list in search mode: the
// tools of searchTools, then found (the tools find_tools found for the
// session, as tools/list would list them), in one page, with meta as its
// _meta if not nil. params is checked as a list request's are; a cursor is
// refused, since the one page has none to give.
func searchToolsPage(params, meta json.RawMessage, found ...json.RawMessage) (json.RawMessage, error) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: "tools/list: invalid params: " + err.Error()}
		}
	}
	if p.Cursor != nil && *p.Cursor != "" {
		return nil, &wireError{Code: codeInvalidParams, Message: "tools/list: invalid cursor (search mode lists its tools in one page)"}
	}
	out := []byte(`{"tools":[`)
	for i, t := range slices.Concat(searchTools, found) {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t...)
	}
	out = append(out, ']')
	if meta != nil {
		out = append(out, `,"_meta":`...)
		out = append(out, meta...)
	}
	return append(out, '}'), nil
}

// searchArgs is a tools/call of a search-mode tool, read: the tool's name
// and its arguments' members.
type searchArgs struct {
	name string
	args map[string]json.RawMessage
}

// readSearchCall reads the params of a tools/call: its name, and, for
// find_tools and call_tool, its arguments. ok is false when the call names
// another tool. The error, a -32602 one, says which argument is wrong and
// how.
func readSearchCall(params json.RawMessage) (c searchArgs, ok bool, err *wireError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil || (p.Name != findToolsName && p.Name != callToolName) {
		return c, false, nil // the route says what is wrong with it, as it does of any call
	}
	c.name = p.Name
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if json.Unmarshal(p.Arguments, &c.args) != nil || c.args == nil {
			return c, true, searchError(c.name, "arguments must be an object, as its inputSchema says")
		}
	}
	return c, true, nil
}

// searchError returns the -32602 error of a call of search-mode tool tool
// whose arguments are wrong.
func searchError(tool, format string, a ...any) *wireError {
	return &wireError{Code: codeInvalidParams, Message: tool + ": " + fmt.Sprintf(format, a...)}
}

// findQuery reads find_tools' arguments: the query, and the limit (default
// defaultFindLimit). Each is checked before any work is done on it: a query
// longer than maxQueryBytes is refused unread.
func findQuery(args map[string]json.RawMessage) (query string, limit int, werr *wireError) {
	raw, ok := args["query"]
	if !ok {
		return "", 0, searchError(findToolsName, `"query" is missing; say what you want to do in a few words: {"query": "read the last lines of a log file"}`)
	}
	if len(raw) > 6*maxQueryBytes+2 { // even all escapes would be too long
		return "", 0, searchError(findToolsName, `"query" is %d bytes of JSON; at most %d bytes: say what you want to do in a few words`, len(raw), maxQueryBytes)
	}
	if json.Unmarshal(raw, &query) != nil {
		return "", 0, searchError(findToolsName, `"query" must be a string, not %s`, jsonKind(raw))
	}
	if len(query) > maxQueryBytes {
		return "", 0, searchError(findToolsName, `"query" is %d bytes; at most %d: say what you want to do in a few words`, len(query), maxQueryBytes)
	}
	limit = defaultFindLimit
	if raw, ok := args["limit"]; ok && string(raw) != "null" {
		var f float64
		if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) {
			return "", 0, searchError(findToolsName, `"limit" must be a whole number from 1 to %d, not %s`, maxFindLimit, raw)
		}
		if f < 1 || f > maxFindLimit {
			return "", 0, searchError(findToolsName, `"limit" is %s; want 1 to %d`, raw, maxFindLimit)
		}
		limit = int(f)
	}
	if len(searchTerms(query, nil)) == 0 {
		return "", 0, searchError(findToolsName, `"query" %q has no word to search for; say what you want to do: "read the last lines of a log file"`, query)
	}
	return query, limit, nil
}

// findResult returns the result of find_tools: a text content item holding
// {"tools": [...]}, the definitions of the tools found, best first, as
// tools/list would list them (their names the ones to call).
func findResult(found []*catalogItem) json.RawMessage {
	body := []byte(`{"tools":[`)
	for i, it := range found {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, it.raw...)
	}
	body = append(body, "]}"...)
	text, _ := json.Marshal(string(body))
	out := []byte(`{"content":[{"type":"text","text":`)
	out = append(out, text...)
	return append(out, "}]}"...)
}

// callToolParams returns the params of the tools/call that call_tool's
// params (with its arguments args, read) stand for: the same members (its
// _meta and task, if any), with the name and the arguments call_tool names.
func callToolParams(params json.RawMessage, args map[string]json.RawMessage) (json.RawMessage, *wireError) {
	var name string
	if raw, ok := args["name"]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return nil, searchError(callToolName, `"name" must be the name of a tool find_tools gave, a string, not %s`, jsonKind(args["name"]))
	}
	inner := json.RawMessage(`{}`)
	if raw, ok := args["arguments"]; ok && string(raw) != "null" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return nil, searchError(callToolName, `"arguments" must be an object of the arguments of tool %q, not %s`, name, jsonKind(raw))
		}
		inner = raw
	}
	var fields map[string]json.RawMessage
	json.Unmarshal(params, &fields) // readSearchCall read it
	fields["name"], _ = json.Marshal(name)
	fields["arguments"] = inner
	out, _ := json.Marshal(fields)
	return out, nil
}

// maxSearchIndexes bounds the search indexes toolSearch keeps: past it,
// the index used least recently is dropped, and built again at its next
// find_tools. One index of 2,000 tools keeps under 1 MB alive
// (docs/performance.md, "Search mode").
const maxSearchIndexes = 8

// toolSearch keeps the search indexes of the views of the catalog in force:
// one for each set of tools a view sees, so that views that see the same
// tools (profiles that differ in prompts or resources alone, or the same
// profile again after a reload) share one; at most maxSearchIndexes,
// those used most recently. An index is built the first time a client of
// a view of its tools searches, and all are dropped when the catalog
// changes. It is safe for concurrent use.
type toolSearch struct {
	mu      sync.Mutex
	cat     *catalog             // the catalog the indexes are of
	sets    map[*view]toolSetKey // the set of tools each view that searched sees (one per view of the catalog, as catalog.listsFor keeps)
	indexes []*searchIndex       // used least recently first
	builds  int                  // indexes built since cat came into force, for tests
}

// toolSetKey names a set of the catalog's tools: a SHA-256 of their names,
// in list order. Within one catalog a name is one tool, so two views with
// the same key see the same tools.
type toolSetKey [sha256.Size]byte

// searchIndex is the index of one set of tools, once built: x is set
// before built is closed, and not changed after.
type searchIndex struct {
	set   toolSetKey
	built chan struct{}
	x     *toolIndex
}

// find returns the tools of catalog cat that view v sees which match query
// best, at most limit, best first.
func (s *toolSearch) find(cat *catalog, v *view, query string, limit int) []*catalogItem {
	return s.indexOf(cat, v).search(query, limit)
}

// indexOf returns the index of the tools of cat that v sees, building it if
// it must. The lock is not held while it builds: two clients of views of
// one set of tools that search at once build its index once (the second
// waits for the first's), and a search of another set waits for neither.
func (s *toolSearch) indexOf(cat *catalog, v *view) *toolIndex {
	tools := &cat.listsFor(v)[kindTool]
	s.mu.Lock()
	if s.cat != cat {
		s.cat, s.sets, s.indexes, s.builds = cat, map[*view]toolSetKey{}, nil, 0
	}
	set, ok := s.sets[v]
	if !ok {
		set = toolSetOf(tools)
		s.sets[v] = set
	}
	i := slices.IndexFunc(s.indexes, func(e *searchIndex) bool { return e.set == set })
	var e *searchIndex
	if i >= 0 {
		e = s.indexes[i]
		s.indexes = append(slices.Delete(s.indexes, i, i+1), e)
	} else {
		e = &searchIndex{set: set, built: make(chan struct{})}
		if len(s.indexes) == maxSearchIndexes {
			s.indexes = slices.Delete(s.indexes, 0, 1)
		}
		s.indexes = append(s.indexes, e)
		s.builds++
	}
	s.mu.Unlock()
	if i < 0 {
		e.x = newToolIndex(itemPointers(tools))
		close(e.built)
	}
	<-e.built
	return e.x
}

// toolSetOf returns the key of the set of tools l holds.
func toolSetOf(l *catalogList) toolSetKey {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for i := range l.items {
		name := l.items[i].name
		h.Write(binary.AppendUvarint(n[:0], uint64(len(name))))
		io.WriteString(h, name)
	}
	return toolSetKey(h.Sum(nil))
}

// itemPointers returns pointers to the items of l, in order.
func itemPointers(l *catalogList) []*catalogItem {
	ptrs := make([]*catalogItem, len(l.items))
	for i := range l.items {
		ptrs[i] = &l.items[i]
	}
	return ptrs
}

// The fields of a tool that its index holds, and their weights: a word of
// its name says more of what it does than a word of a parameter's
// description.
const (
	fieldName = iota
	fieldTitle
	fieldDesc
	fieldParam
	fieldParamDesc
	fieldServer
	numFields
)

var fieldWeights = [numFields]float64{
	fieldName:      3,
	fieldTitle:     2,
	fieldDesc:      1,
	fieldParam:     1,
	fieldParamDesc: 0.5,
	fieldServer:    2,
}

// BM25's parameters, at their usual values: k1 saturates a term's
// frequency, b weighs a field's length against the mean of its kind.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// toolIndex is a BM25F index of a list of tools (Robertson, Zaragoza and
// Taylor, 2004): a term's frequency in each field is normalised by the
// field's length against that field's mean length over the tools, weighed
// by the field's weight, and summed, before BM25 saturates it, so that a
// long description neither drowns a tool's name nor wins on length alone.
// It is never changed once built, and safe for concurrent use.
//
// It keeps what search reads and nothing else: each term once, numbered,
// and the postings of every term in one array, term after term, each
// term's in the order of its tools. Nothing of the tools' JSON, read to
// build it, is kept: a term is a copy, not a piece of a description.
type toolIndex struct {
	items    []*catalogItem
	terms    map[string]int32 // a term's number t: its postings are postings[offsets[t]:offsets[t+1]]
	offsets  []int32
	postings []posting
	vocab    []string        // the keys of terms, in order
	whole    map[string]bool // the terms that are split words whole ("createbranch"), which no prefix brings in
}

// posting is a term's normalised, weighed frequency in one tool.
type posting struct {
	doc int32
	tf  float32
}

// postingsOf returns the postings of term, in the order of their tools;
// none if no tool holds it.
func (x *toolIndex) postingsOf(term string) []posting {
	t, ok := x.terms[term]
	if !ok {
		return nil
	}
	return x.postings[x.offsets[t]:x.offsets[t+1]]
}

// newToolIndex indexes items. It reads each tool once, keeping its fields'
// terms as numbers (words, ends) and counting the tools that hold each term,
// then, the fields' mean lengths known, writes each tool's postings in
// place.
func newToolIndex(items []*catalogItem) *toolIndex {
	x := &toolIndex{items: items, terms: map[string]int32{}, whole: map[string]bool{}}
	split := func(text string, out []string) []string {
		return splitTerms(text, out, func(term string) { x.whole[strings.Clone(term)] = true })
	}
	var (
		words []int32                                // the terms of every field of every tool, by number, in order
		ends  = make([][numFields]int32, len(items)) // where each field of each tool ends in words
		held  []int32                                // by term: the tools that hold it
		last  []int32                                // by term: the last tool that held it, plus 1
		avg   [numFields]float64
		f     [numFields][]string // the terms of each field of the tool being read
	)
	for i, it := range items {
		readToolFields(it, split, &f)
		for k := range numFields {
			avg[k] += float64(len(f[k]))
			for _, w := range f[k] {
				term, ok := x.terms[w]
				if !ok {
					term = int32(len(held))
					x.terms[strings.Clone(w)] = term
					held, last = append(held, 0), append(last, 0)
				}
				if last[term] != int32(i+1) {
					last[term] = int32(i + 1)
					held[term]++
				}
				words = append(words, term)
			}
			ends[i][k] = int32(len(words))
		}
	}
	for k := range numFields {
		avg[k] /= float64(max(len(items), 1))
	}
	x.offsets = make([]int32, len(held)+1)
	for term, n := range held {
		x.offsets[term+1] = x.offsets[term] + n
	}
	x.postings = make([]posting, x.offsets[len(held)])
	next := slices.Clone(x.offsets[:len(held)]) // by term: where its next posting goes
	tf := make([]float64, len(held))            // by term: its frequency in the tool being written
	in := make([]bool, len(held))               // by term: whether the tool being written holds it
	var terms []int32                           // the terms of the tool being written
	start := int32(0)
	for i := range items {
		for k := range numFields {
			end := ends[i][k]
			if end == start {
				continue
			}
			norm := fieldWeights[k] / (1 - bm25B + bm25B*float64(end-start)/avg[k])
			for _, term := range words[start:end] {
				if !in[term] {
					in[term] = true
					terms = append(terms, term)
				}
				tf[term] += norm
			}
			start = end
		}
		for _, term := range terms {
			x.postings[next[term]] = posting{int32(i), float32(tf[term])}
			next[term]++
			tf[term], in[term] = 0, false
		}
		terms = terms[:0]
	}
	x.vocab = slices.Sorted(maps.Keys(x.terms))
	return x
}

// readToolFields sets f to the terms, by split, of each field of tool it,
// reusing f's arrays.
func readToolFields(it *catalogItem, split func(string, []string) []string, f *[numFields][]string) {
	var t struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
		InputSchema schemaText `json:"inputSchema"`
	}
	json.Unmarshal(it.raw, &t) // the catalog holds objects only; a field of another type is left out
	for k := range f {
		f[k] = f[k][:0]
	}
	f[fieldName] = split(it.name, f[fieldName])
	f[fieldTitle] = split(t.Title, f[fieldTitle])
	if t.Annotations.Title != t.Title {
		f[fieldTitle] = split(t.Annotations.Title, f[fieldTitle])
	}
	f[fieldDesc] = split(t.Description, f[fieldDesc])
	t.InputSchema.terms(split, &f[fieldParam], &f[fieldParamDesc], maxSchemaDepth)
	f[fieldServer] = split(it.backend.name, f[fieldServer])
}

// schemaText is the text of a JSON Schema that tells what a tool's
// arguments are: its properties' names, titles, descriptions and allowed
// values, at every depth (arrays' items, alternatives), up to
// maxSchemaDepth.
type schemaText struct {
	Title       string                `json:"title"`
	Description string                `json:"description"`
	Enum        []any                 `json:"enum"`
	Properties  map[string]schemaText `json:"properties"`
	Items       *schemaText           `json:"items"`
	AnyOf       []schemaText          `json:"anyOf"`
	OneOf       []schemaText          `json:"oneOf"`
}

// maxSchemaDepth bounds how deep schemaText.terms reads a schema: an
// argument's own properties, and theirs, say what a tool takes; deeper
// ones add words, not meaning.
const maxSchemaDepth = 3

// terms appends, with split, to text the title, description and allowed string values
// of s, and to names the names of its properties, and reads its properties
// and subschemas (arrays' items, alternatives) the same way, up to depth
// levels down.
func (s *schemaText) terms(split func(string, []string) []string, names, text *[]string, depth int) {
	*text = split(s.Title+" "+s.Description, *text)
	for _, v := range s.Enum {
		if v, ok := v.(string); ok {
			*text = split(v, *text)
		}
	}
	if depth == 0 {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		*names = split(name, *names)
		p := s.Properties[name]
		p.terms(split, names, text, depth-1)
	}
	for _, sub := range slices.Concat([]*schemaText{s.Items}, pointers(s.AnyOf), pointers(s.OneOf)) {
		if sub != nil {
			sub.terms(split, names, text, depth-1)
		}
	}
}

// pointers returns pointers to the elements of s.
func pointers[T any](s []T) []*T {
	ps := make([]*T, len(s))
	for i := range s {
		ps[i] = &s[i]
	}
	return ps
}

// search returns the tools that match query best, at most limit, best
// first; tools of equal score come in the order of their names. A tool
// that shares no term with the query is not returned. Its work is bounded
// by the query's terms (searchTerms) times the tools that hold each.
func (x *toolIndex) search(query string, limit int) []*catalogItem {
	if len(x.items) == 0 {
		return nil
	}
	scores := make([]float64, len(x.items))
	tf := make([]float64, len(x.items)) // of one concept, in each tool
	var holders []int32                 // the tools that hold one concept
	n := float64(len(x.items))
	for _, c := range x.concepts(query) {
		holders = holders[:0]
		for _, q := range c {
			for _, p := range x.postingsOf(q.term) {
				if tf[p.doc] == 0 {
					holders = append(holders, p.doc)
				}
				tf[p.doc] += q.weight * float64(p.tf)
			}
		}
		df := float64(len(holders))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, d := range holders {
			scores[d] += idf * tf[d] * (bm25K1 + 1) / (tf[d] + bm25K1)
			tf[d] = 0
		}
	}
	// The best limit tools, best first, kept by insertion: most tools
	// score below the last of them and cost a comparison.
	before := func(a, b int) bool { // whether tool a ranks before tool b
		if scores[a] != scores[b] {
			return scores[a] > scores[b]
		}
		return x.items[a].name < x.items[b].name
	}
	best := make([]int, 0, limit+1)
	for i, sc := range scores {
		if sc <= 0 || len(best) == limit && !before(i, best[limit-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(best, i, func(e, t int) int {
			if before(e, t) {
				return -1
			}
			return 1
		})
		best = slices.Insert(best, at, i)
		if len(best) > limit {
			best = best[:limit]
		}
	}
	out := make([]*catalogItem, len(best))
	for j, i := range best {
		out[j] = x.items[i]
	}
	return out
}

// concepts returns what query asks for, as the index can find it: a
// concept for each word of the query (searchTerms) and each two words
// that follow each other (compounds), each once. A concept is its word,
// at weight 1, with the word's synonyms at synonymWeight, and the terms of
// the index that begin with one of those or that one of those begins with,
// each of at least minPrefix letters ("config" and "configur" of
// "configure"), at prefixWeight times the weight of the term they come
// from: the truncation search engines offer, for derived forms the stemmer
// leaves ("deploy", "deployment"). A concept holds each term once, at its
// greatest weight, and only terms the index holds; a term brings in at
// most maxPrefixTerms that begin with it. search scores a concept as one
// term, so that a tool that matches a rare synonym of a common word does
// not outrank one that uses the word itself (as Lucene's SynonymQuery).
func (x *toolIndex) concepts(query string) [][]queryTerm {
	var out [][]queryTerm
	seen := map[string]bool{}
	for _, word := range slices.Concat(compounds(query, searchTerms(query, nil)), entityWords(query)) {
		if seen[word] {
			continue
		}
		seen[word] = true
		if c := x.concept(word); len(c) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// concept returns the concept of one word of a query (concepts): the
// terms the index holds of the word, its synonyms and their prefixes, each
// once at its greatest weight; none if the index holds none of them.
func (x *toolIndex) concept(word string) []queryTerm {
	weight := map[string]float64{}
	var order []string
	add := func(term string, w float64) {
		if _, ok := x.terms[term]; !ok {
			return
		}
		if old, ok := weight[term]; !ok {
			order = append(order, term)
		} else if old >= w {
			return
		}
		weight[term] = w
	}
	terms := []queryTerm{{word, 1}}
	for _, syn := range synonymsOf[word] {
		if syn != word {
			terms = append(terms, queryTerm{syn, synonymWeight})
		}
	}
	for _, q := range terms {
		add(q.term, q.weight)
		if len(q.term) < minPrefix {
			continue
		}
		w := q.weight * prefixWeight
		for l := minPrefix; l < len(q.term); l++ {
			add(q.term[:l], w)
		}
		at, _ := slices.BinarySearch(x.vocab, q.term)
		for n := 0; at < len(x.vocab) && n < maxPrefixTerms && strings.HasPrefix(x.vocab[at], q.term); at++ {
			if x.vocab[at] != q.term && !x.whole[x.vocab[at]] {
				add(x.vocab[at], w)
				n++
			}
		}
	}
	c := make([]queryTerm, len(order))
	for i, t := range order {
		c[i] = queryTerm{t, weight[t]}
	}
	return c
}

// A prefix is at least minPrefix letters, its terms weigh prefixWeight
// times the term they come from, and a term brings in at most
// maxPrefixTerms that begin with it.
const (
	minPrefix      = 4
	prefixWeight   = 0.5
	maxPrefixTerms = 8
)

// queryTerm is a term of a query, and its weight: 1 for a word of the
// query, synonymWeight for a synonym of one (synonyms).
type queryTerm struct {
	term   string
	weight float64
}
