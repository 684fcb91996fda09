package main

// This file holds the package's scanning of raw JSON: finding the members of
// an object, and the end of a value, without decoding them, so that a large
// result is passed on as the bytes it arrived in; and the incremental
// scanner that follows JSON fed to it in pieces.

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// members calls f with the name and raw value of each member of the JSON
// object in data, which must be valid JSON; it does nothing if data is not
// an object. Member names with escapes are passed as written.
func members(data []byte, f func(key string, value []byte)) {
	rawMembers(data, func(key, value []byte) { f(string(key), value) })
}

// rawMembers is members with each name as the slice of data it is, for
// callers that compare names without making strings of them.
func rawMembers(data []byte, f func(key, value []byte)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return // '}' or the end
		}
		end := skipString(data, i)
		key := data[i+1 : end-1]
		i = skipSpace(data, end)
		i = skipSpace(data, i+1) // past ':'
		start := i
		i = skipValue(data, i)
		f(key, data[start:i])
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i++
	}
}

// plainString sets *s to value, a JSON string without escapes in valid
// UTF-8, and reports true; null leaves *s as it is, as encoding/json does.
// Anything else reports false: the caller decodes it with encoding/json.
func plainString(value []byte, s *string) bool {
	if string(value) == "null" {
		return true
	}
	if len(value) < 2 || value[0] != '"' || bytes.IndexByte(value, '\\') >= 0 || !utf8.Valid(value) {
		return false
	}
	if raw := value[1 : len(value)-1]; string(raw) == "2.0" {
		*s = "2.0" // what every message's "jsonrpc" says: not copied
	} else {
		*s = string(raw)
	}
	return true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at data[i].
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the index just past the value starting at data[i].
func skipValue(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i = skipString(data, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
}

// errLineBreak reports a raw line break inside a string, invalid in JSON,
// which would end the line early.
var errLineBreak = errors.New("a raw line break inside a JSON string")

// jsonScanner follows JSON fed to it in pieces, in constant memory: its
// strings and their escapes, the depth of its brackets, the names of the
// members of the object at depth top, and the value of the member named
// capture, which it keeps compacted (without whitespace between tokens), up
// to max bytes. Member names with escapes are compared as written. It is
// how a value too large to keep, or not yet whole, is matched to what it
// answers. The caller feeds it: str inside a string, space for whitespace
// outside one, out for any other byte. It is not safe for concurrent use.
type jsonScanner struct {
	capture string // the name of the member whose value is kept
	max     int    // the most bytes of that value kept
	breaks  bool   // a raw line break inside a string is an error, not a byte of it
	// With sticky, a member name capture is kept for the next colon at
	// depth top, whatever strings or commas come before it; without, only
	// the last member name read counts. (Both are as the two scanners this
	// one replaced read malformed JSON such as {"id" "x":1}.)
	sticky bool
	top    int // the depth of the members read: just inside their object

	depth  int
	inStr  bool
	esc    bool   // the next byte of the string is escaped
	keyPos bool   // the next string at depth top is a member name
	inKey  bool   // reading a member name
	key    []byte // its first 8 bytes
	named  bool   // the last member name read was capture
	inVal  bool   // reading the value of capture
	val    []byte
	long   bool // the value was over max: bytes of it were dropped
	hasTok bool // the end of the value's first token was seen
	tok    int  // the length of val there, or -1 if the token is not whole
}

// clear forgets the members read, for a new object at depth top.
func (s *jsonScanner) clear() {
	s.keyPos, s.inKey, s.named, s.inVal = true, false, false, false
	s.val, s.long, s.hasTok, s.tok = s.val[:0], false, false, 0
}

// str scans p from i, inside a string, and returns where the scan goes on,
// and whether a member name ended there. With breaks, p[i] a raw line break
// is errLineBreak.
func (s *jsonScanner) str(p []byte, i int) (next int, keyEnd bool, err error) {
	if s.esc {
		s.esc = false
		s.note(p[i : i+1])
		return i + 1, false, nil
	}
	special := "\"\\"
	if s.breaks {
		special = "\"\\\n\r"
	}
	// Most of a large value is the inside of a string: skip to its next
	// special byte.
	j := bytes.IndexAny(p[i:], special)
	switch {
	case j < 0:
		s.note(p[i:])
		return len(p), false, nil
	case j > 0:
		s.note(p[i : i+j])
		return i + j, false, nil
	}
	switch p[i] {
	case '"':
		s.inStr = false
		if s.inKey {
			s.inKey = false
			s.named = string(s.key) == s.capture || s.sticky && s.named
			return i + 1, true, nil
		}
		s.note(p[i : i+1])
		if s.inVal && s.depth == s.top && len(s.val) > 0 && s.val[0] == '"' {
			s.endTok(true) // the value is this string
		}
	case '\\':
		s.esc = true
		s.note(p[i : i+1])
	default:
		return i, false, errLineBreak
	}
	return i + 1, false, nil
}

// space scans whitespace outside a string: it ends the first token of the
// value of capture.
func (s *jsonScanner) space() {
	if s.inVal && len(s.val) > 0 {
		s.endTok(true)
	}
}

// out scans p[i], a byte outside a string that is not whitespace. It
// reports whether it closed the object of depth top.
func (s *jsonScanner) out(p []byte, i int) (closed bool) {
	top := s.depth == s.top
	switch c := p[i]; c {
	case '"':
		s.inStr = true
		if top && s.keyPos {
			s.inKey, s.key = true, s.key[:0]
			return false
		}
	case '{', '[':
		s.depth++
		if s.depth == s.top {
			s.keyPos = c == '{'
		}
	case '}', ']':
		s.depth--
		if s.depth == s.top-1 {
			s.endVal(c == '}')
			return true
		}
	case ':':
		if top {
			s.endVal(false)
			s.keyPos, s.inVal, s.named = false, s.named, false
			return false
		}
	case ',':
		if top {
			s.endVal(true)
			s.keyPos, s.named = true, s.sticky && s.named
			return false
		}
	}
	s.note(p[i : i+1])
	return false
}

// note records b, bytes outside whitespace, if they belong to a member
// name or to the value of capture.
func (s *jsonScanner) note(b []byte) {
	switch {
	case s.inKey:
		s.key = append(s.key, b[:min(len(b), 8-len(s.key))]...)
	case s.inVal:
		if len(s.val)+len(b) > s.max {
			s.long = true
			return
		}
		s.val = append(s.val, b...)
	}
}

// endVal ends the value of capture, if it is being read; delim says whether
// what ends it may end a token.
func (s *jsonScanner) endVal(delim bool) {
	if s.inVal {
		s.inVal = false
		s.endTok(delim)
	}
}

// endTok marks the end of the first token of the value of capture, whole
// if ok and no byte of it was dropped.
func (s *jsonScanner) endTok(ok bool) {
	if s.hasTok {
		return
	}
	s.hasTok, s.tok = true, len(s.val)
	if !ok || s.long {
		s.tok = -1
	}
}

// first returns the first token of the first value of capture: a string,
// or what comes before the first whitespace, comma or brace. It returns
// nil if there is none, or it is not whole.
func (s *jsonScanner) first() []byte {
	if !s.hasTok || s.tok < 0 {
		return nil
	}
	return s.val[:s.tok]
}
