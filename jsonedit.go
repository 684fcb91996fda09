package main

// Editing raw JSON in place, on the scanning of jsonscan.go: a few values
// of a large message (a URI in a result, a task's ID) are replaced, and
// every other byte is passed on as it came, never decoded or encoded again.

import (
	"bytes"
	"encoding/json"
	"strings"
)

// rawEditor edits JSON in place: it walks objects and arrays by offsets
// into data, without decoding them, and collects replacements of values;
// output applies them. The rest of data is kept byte for byte.
type rawEditor struct {
	data  []byte
	edits []rawEdit // in order of position, not overlapping
}

// rawEdit replaces data[start:end] with with.
type rawEdit struct {
	start, end int
	with       []byte
}

// replace replaces the value at data[start:end] with the JSON string s.
// Edits must be made in order of position.
func (rw *rawEditor) replace(start, end int, s string) {
	rw.edits = append(rw.edits, rawEdit{start, end, jsonString(s)})
}

// object calls f with the name and the start and end of the value of each
// member of the object at i; it does nothing if no object is at i.
func (rw *rawEditor) object(i int, f func(key string, vs, ve int)) {
	data := rw.data
	if i >= len(data) || data[i] != '{' {
		return
	}
	for i = skipSpace(data, i+1); i < len(data) && data[i] == '"'; {
		end := skipString(data, i)
		if end-1 <= i {
			return // cut short
		}
		key := string(data[i+1 : end-1])
		i = skipSpace(data, end)
		vs := skipSpace(data, i+1) // past ':'
		ve := skipValue(data, vs)
		f(key, vs, ve)
		i = skipSpace(data, ve)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i = skipSpace(data, i+1)
	}
}

// member returns the start and end of the value at path, the names of
// members of nested objects from the object at i; ok is false if there is
// none.
func (rw *rawEditor) member(i int, path ...string) (start, end int, ok bool) {
	if len(path) == 0 {
		return i, skipValue(rw.data, i), i < len(rw.data)
	}
	rw.object(i, func(key string, vs, _ int) {
		if key == path[0] && !ok {
			start, end, ok = rw.member(vs, path[1:]...)
		}
	})
	return start, end, ok
}

// array calls f with the start of each element of the array at i; it does
// nothing if no array is at i.
func (rw *rawEditor) array(i int, f func(es int)) {
	data := rw.data
	if i >= len(data) || data[i] != '[' {
		return
	}
	for i = skipSpace(data, i+1); i < len(data) && data[i] != ']'; {
		f(i)
		i = skipSpace(data, skipValue(data, i))
		if i >= len(data) || data[i] != ',' {
			return
		}
		i = skipSpace(data, i+1)
	}
}

// output returns the data with the edits made; the data itself if there
// are none.
func (rw *rawEditor) output() json.RawMessage {
	if len(rw.edits) == 0 {
		return rw.data
	}
	n := len(rw.data)
	for _, e := range rw.edits {
		n += len(e.with) - (e.end - e.start)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, e := range rw.edits {
		out = append(out, rw.data[at:e.start]...)
		out = append(out, e.with...)
		at = e.end
	}
	return append(out, rw.data[at:]...)
}

// jsonString returns s as a JSON string, without the HTML escapes of
// json.Marshal: a URI's & stays &.
func jsonString(s string) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// setMeta returns params with member key of its _meta set to value. No
// params count as an empty object; params that are not an object are
// returned as they are.
func setMeta(params json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil || fields == nil {
		return params
	}
	var meta map[string]json.RawMessage
	json.Unmarshal(fields["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[key] = value
	fields["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(fields)
	return out
}

// setMember returns the object raw with member key set to value; raw that is
// not an object is returned as it is.
func setMember(raw json.RawMessage, key string, value any) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return raw
	}
	fields[key], _ = json.Marshal(value)
	out, _ := json.Marshal(fields)
	return out
}

// legacyMeta returns params with the members of its _meta that a legacy
// server is not sent (see legacyMetaKey) removed; params with none are
// returned as they are, without being decoded. Members whose names are
// written with escapes are judged by what they decode to.
func legacyMeta(params json.RawMessage) json.RawMessage {
	escaped := bytes.Contains(params, []byte(`\u`))
	if !escaped && !bytes.Contains(params, []byte(`"_meta"`)) {
		return params // the common case, decided without scanning
	}
	drop := escaped
	members(params, func(key string, value []byte) {
		if key == "_meta" {
			members(value, func(key string, _ []byte) { drop = drop || !legacyMetaKey(key) })
		}
	})
	if !drop {
		return params
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(params, &fields) != nil || fields == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(fields["_meta"], &meta) != nil || meta == nil {
		return params
	}
	n := len(meta)
	for key := range meta {
		if !legacyMetaKey(key) {
			delete(meta, key)
		}
	}
	if len(meta) == n {
		return params
	}
	fields["_meta"], _ = json.Marshal(meta)
	out, _ := json.Marshal(fields)
	return out
}

// setMetaRaw is setMeta for a key that is a plain ASCII name: it edits
// params in place of decoding and encoding them again, keeping the rest of
// them byte for byte (the common case, params without _meta, costs one
// copy). Params it cannot edit so (not an object, names written with
// escapes, a _meta that is not an object) go to setMeta.
func setMetaRaw(params json.RawMessage, key string, value json.RawMessage) json.RawMessage {
	i := skipSpace(params, 0)
	if i >= len(params) || params[i] != '{' || bytes.Contains(params, []byte(`\u`)) {
		return setMeta(params, key, value)
	}
	rw := rawEditor{data: params}
	if s, e, ok := rw.member(i, "_meta", key); ok {
		out := make([]byte, 0, len(params)-(e-s)+len(value))
		out = append(out, params[:s]...)
		out = append(out, value...)
		return append(out, params[e:]...)
	}
	at, member := i, `"_meta":{"`+key+`":`
	if s, _, ok := rw.member(i, "_meta"); ok {
		if s >= len(params) || params[s] != '{' {
			return setMeta(params, key, value)
		}
		at, member = s, `"`+key+`":`
	}
	next := skipSpace(params, at+1)
	if next >= len(params) {
		return setMeta(params, key, value) // cut short
	}
	out := make([]byte, 0, len(params)+len(member)+len(value)+2)
	out = append(out, params[:at+1]...)
	out = append(out, member...)
	out = append(out, value...)
	if at == i {
		out = append(out, '}') // the new _meta's end
	}
	if params[next] != '}' {
		out = append(out, ',')
	}
	return append(out, params[at+1:]...)
}
