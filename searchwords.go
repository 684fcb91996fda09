package main

// This file holds the words of search mode: how a text becomes the terms
// find_tools ranks by (split, folded, stemmed, stop words left out), the
// synonyms a query's words bring in, and the words some words bring in by
// their form (a file name, a URL, #channel). search.go indexes and ranks.

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// synonymWeight is the weight of a term a query gets from synonyms: a tool
// that uses the query's own word ranks above one that uses a synonym.
const synonymWeight = 0.5

// synonyms are groups of words that tools and their users use for one
// thing: a word of a query brings in the others of its group. They are
// words of general software and everyday use (what is done, to what,
// where), not names of any server's tools. The list was written after
// reading the misses of four of testdata/catalogs' sets of tasks, the sets
// the ranker was tuned on; blind3.json and blind4.json, which no one tuned
// on, measure it (docs/performance.md, "Search mode").
var synonyms = [][]string{
	// what is done
	{"create", "make", "new", "add", "generate", "open"},
	{"delete", "remove", "erase", "drop", "destroy", "forget", "wipe", "purge", "nuke", "rm", "discard", "trash"},
	{"edit", "modify", "change", "update", "alter", "tweak", "patch", "replace", "rewrite", "amend"},
	{"search", "find", "lookup", "locate", "query", "grep", "look", "seek"},
	{"show", "display", "view", "list", "see", "print", "enumerate", "ls"},
	{"read", "open", "view", "load", "cat", "content", "contents"},
	{"open", "navigate", "visit", "browse", "goto", "go"},
	{"run", "execute", "exec", "launch", "start", "invoke", "trigger", "evaluate", "eval"},
	{"stop", "kill", "terminate", "cancel", "abort", "halt", "end", "quit", "exit"},
	{"undo", "revert", "reset", "rollback", "restore"},
	{"move", "rename", "mv"},
	{"copy", "duplicate", "clone", "cp"},
	{"save", "write", "store", "persist", "put"},
	{"download", "fetch", "retrieve", "grab"},
	{"upload", "attach"},
	{"send", "post", "publish"},
	{"reply", "respond", "answer", "thread"},
	{"link", "relation", "relationship", "relate", "connect", "associate"},
	{"remember", "memory", "memorize", "recall", "knowledge"},
	{"click", "press", "tap"},
	{"type", "fill", "enter", "input"},
	{"wait", "sleep", "pause", "delay"},
	{"close", "shut"},
	{"merge", "combine", "squash"},
	{"compare", "diff", "difference"},
	{"restart", "reboot", "bounce"},
	{"deploy", "deployment", "rollout", "release", "ship"},
	{"scale", "resize", "replica"},
	{"install", "setup"},
	{"sum", "add", "plus", "total", "addition"},
	{"review", "approve", "approval"},
	{"react", "reaction", "emoji"},
	{"think", "thought", "reason", "reasoning", "plan", "brainstorm"},
	// what it is done to
	{"directory", "folder", "dir"},
	{"process", "program", "app", "application", "pid"},
	{"image", "picture", "photo", "png", "jpeg", "jpg"},
	{"screenshot", "capture", "snap"},
	{"website", "site", "webpage"},
	{"url", "link", "href"},
	{"web", "internet", "online"},
	{"javascript", "js"},
	{"typescript", "ts"},
	{"python", "py"},
	{"repository", "repo"},
	{"terminal", "shell", "command", "cli", "bash"},
	{"issue", "bug", "ticket"},
	{"pr", "pullrequest", "mr"},
	{"history", "log"},
	{"log", "output", "stdout", "console", "print"},
	{"error", "exception", "failure", "fail", "crash"},
	{"tag", "label"},
	{"documentation", "docs", "doc", "manual", "reference", "guide"},
	{"library", "package", "framework", "module", "lib", "dependency", "sdk"},
	{"user", "member", "person", "people", "account", "coworker", "colleague", "teammate", "employee", "contact"},
	{"organization", "org", "company", "team"},
	{"configuration", "config", "setting", "settings", "preference", "option"},
	{"environment", "env"},
	{"variable", "var"},
	{"information", "info", "detail", "details", "metadata"},
	{"size", "big", "large", "bytes"},
	{"database", "db", "sql", "table", "row", "column", "record"},
	{"text", "txt", "plain"},
	{"markdown", "md"},
	{"container", "pod"},
	{"secret", "credential", "password"},
	{"transcript", "caption", "subtitle"},
	{"video", "youtube"},
	{"message", "msg", "chat", "dm", "said", "saying", "conversation"},
	{"channel", "room"},
	{"tab", "window"},
	{"dialog", "popup", "alert", "confirm", "modal", "prompt"},
	{"news", "article", "blog"},
	{"test", "demo", "example"},
	// where
	{"distance", "far", "travel", "drive", "driving", "commute", "trip"},
	{"elevation", "altitude", "height", "high"},
	{"coordinate", "latitude", "longitude", "geocode", "gps", "lat", "lng"},
	{"address", "location", "place", "venue"},
	{"direction", "route"},
	{"nearby", "near", "local", "around"},
	{"business", "restaurant", "shop", "cafe"},
}

// entityWords returns the words of what some words of text are, by their
// form alone, stemmed: a file name with an extension ("config.yaml",
// "notes/todo.md") is a "file", a path ("/opt/data", "~/src") a "path", a
// URL a "url", "#name" a Slack-style "channel", "@name" a "user", and a
// statement in SQL's capitals ("SELECT * FROM") "sql". Each comes once.
func entityWords(text string) []string {
	var out []string
	add := func(w string) {
		if w = stem(w); !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	for _, tok := range strings.Fields(text) {
		tok = strings.Trim(tok, "\"'`,;:!?()[]{}<>")
		lower := strings.ToLower(tok)
		switch {
		case len(tok) < 2:
		case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "www."):
			add("url")
		case tok[0] == '#' && isLetter(tok[1]):
			add("channel")
		case tok[0] == '@' && isLetter(tok[1]):
			add("user")
		case hasExtension(tok):
			add("file")
		case tok[0] == '/' || strings.HasPrefix(tok, "~/") || strings.HasPrefix(tok, "./"):
			add("path")
		}
	}
	for _, kw := range []string{"SELECT ", "INSERT INTO ", "DELETE FROM ", "CREATE TABLE ", "UPDATE "} {
		if strings.Contains(text, kw) {
			add("sql")
			break
		}
	}
	return out
}

// isLetter reports whether b is an ASCII letter.
func isLetter(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}

// hasExtension reports whether tok ends in a file name's extension: a dot
// after at least one letter, digit, dash or underscore, then one to five
// letters or digits, at least one a letter ("todo.md", "sales_q3.csv"; not
// "3.11" or "v1.4").
func hasExtension(tok string) bool {
	dot := strings.LastIndexByte(tok, '.')
	if dot < 1 || len(tok)-dot-1 < 1 || len(tok)-dot-1 > 5 {
		return false
	}
	ext, letter := tok[dot+1:], false
	for i := 0; i < len(ext); i++ {
		switch c := ext[i]; {
		case isLetter(c):
			letter = true
		case '0' <= c && c <= '9':
		default:
			return false
		}
	}
	c := tok[dot-1]
	return letter && (isLetter(c) || '0' <= c && c <= '9' || c == '_' || c == '-')
}

// compounds appends to out, for each two words that follow each other in
// text, the two as one word, stemmed: a user's "web page", "file name" or
// "screen shot" finds a tool's "webpage", "filename" or "screenshot".
func compounds(text string, out []string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) })
	for i := 1; i < len(words) && len(out) < maxQueryTerms; i++ {
		if !stopWords[words[i-1]] && !stopWords[words[i]] && !ignoredWord(words[i-1]) && !ignoredWord(words[i]) {
			out = append(out, stem(words[i-1]+words[i]))
		}
	}
	return out
}

// synonymsOf holds, by the stem of each word of synonyms, the stems of
// the words of its groups, itself included.
var synonymsOf = func() map[string][]string {
	m := map[string][]string{}
	for _, group := range synonyms {
		for _, w := range group {
			for _, o := range group {
				if !slices.Contains(m[stem(w)], stem(o)) {
					m[stem(w)] = append(m[stem(w)], stem(o))
				}
			}
		}
	}
	return m
}()

// maxQueryTerms bounds the terms searchTerms takes of one text: a query is
// at most maxQueryBytes, and a tool's description past this many words adds
// nothing a ranking needs.
const maxQueryTerms = 4096

// searchTerms appends to out the terms of text, in order: its words split
// at anything that is not a letter or a digit, at a change of case from
// lower to upper ("readFile": read, file), before the last capital of a
// run of them ("HTTPServer": http, server), and between letters and
// digits; a word so split is also a term whole ("JavaScript": java,
// script, javascript). Each is folded to lower case and stemmed lightly
// (stem); the commonest English words (stopWords) are left out.
func searchTerms(text string, out []string) []string {
	return splitTerms(text, out, nil)
}

// splitTerms is searchTerms, and calls whole, unless it is nil, with each
// term that is a split word whole ("javascript").
func splitTerms(text string, out []string, whole func(term string)) []string {
	start, run, parts := -1, -1, 0
	var prev rune
	add := func(w string) bool {
		if w = strings.ToLower(w); len(out) < maxQueryTerms && !stopWords[w] && !ignoredWord(w) {
			out = append(out, stem(w))
			return true
		}
		return false
	}
	part := func(end int) {
		if start >= 0 {
			add(text[start:end])
			parts++
		}
		start = -1
	}
	word := func(end int) {
		part(end)
		if parts > 1 && add(text[run:end]) && whole != nil {
			whole(out[len(out)-1])
		}
		run, parts = -1, 0
	}
	for i, r := range text {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum:
			word(i)
		case start < 0:
			start = i
			if run < 0 {
				run = i
			}
		case unicode.IsUpper(r) && unicode.IsLower(prev),
			unicode.IsDigit(r) != unicode.IsDigit(prev):
			part(i)
			start = i
		case unicode.IsLower(r) && unicode.IsUpper(prev) && i-utf8.RuneLen(prev) > start:
			part(i - utf8.RuneLen(prev))
			start = i - utf8.RuneLen(prev)
		}
		prev = r
		if !alnum {
			prev = 0
		}
	}
	word(len(text))
	return out
}

// stopWords are words too common in tools' descriptions and in requests to
// tell tools apart: Snowball's English stop words (Porter, 2001), with the
// stems contractions leave ("aren" of "aren't"), and the words of asking
// ("please", "tell", "a file called"). searchTerms
// also leaves out single letters and numbers.
var stopWords = map[string]bool{
	"i": true, "me": true, "my": true, "myself": true, "we": true, "our": true, "ours": true,
	"ourselves": true, "you": true, "your": true, "yours": true, "yourself": true, "yourselves": true,
	"he": true, "him": true, "his": true, "himself": true, "she": true, "her": true, "hers": true,
	"herself": true, "it": true, "its": true, "itself": true, "they": true, "them": true,
	"their": true, "theirs": true, "themselves": true, "what": true, "which": true, "who": true,
	"whom": true, "this": true, "that": true, "these": true, "those": true, "am": true, "is": true,
	"are": true, "was": true, "were": true, "be": true, "been": true, "being": true, "have": true,
	"has": true, "had": true, "having": true, "do": true, "does": true, "did": true, "doing": true,
	"would": true, "should": true, "could": true, "ought": true, "a": true, "an": true, "the": true,
	"and": true, "but": true, "if": true, "or": true, "because": true, "as": true, "until": true,
	"while": true, "of": true, "at": true, "by": true, "for": true, "with": true, "about": true,
	"against": true, "between": true, "into": true, "through": true, "during": true, "before": true,
	"after": true, "above": true, "below": true, "to": true, "from": true, "up": true, "down": true,
	"in": true, "out": true, "on": true, "off": true, "over": true, "under": true, "again": true,
	"further": true, "then": true, "once": true, "here": true, "there": true, "when": true,
	"where": true, "why": true, "how": true, "all": true, "any": true, "both": true, "each": true,
	"few": true, "more": true, "most": true, "other": true, "some": true, "such": true, "no": true,
	"nor": true, "not": true, "only": true, "own": true, "same": true, "so": true, "than": true,
	"too": true, "very": true, "can": true, "will": true, "just": true, "don": true, "aren": true,
	"isn": true, "wasn": true, "weren": true, "hasn": true, "haven": true, "hadn": true,
	"doesn": true, "didn": true, "won": true, "wouldn": true, "shouldn": true, "couldn": true,
	"mustn": true, "let": true, "please": true, "called": true, "named": true, "tell": true, "want": true,
	"need": true, "like": true, "using": true, "help": true, "yet": true, "still": true, "also": true, "well": true,
	"right": true, "now": true, "currently": true,
}

// ignoredWord reports whether w is a single letter or a number: neither
// tells tools apart ("the last 20 lines", the "s" of "what's").
func ignoredWord(w string) bool {
	return utf8.RuneCountInString(w) < 2 || strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) }) < 0
}

// stem strips the commonest English inflections from a lower-case word, so
// that "files" finds "file", "listing" finds "list" and "deleted" finds
// "delete": a light stemmer in the manner of Harman's "S" stemmer (1991),
// with -ing and -ed, and a final -e dropped so that "create", "creates",
// "created" and "creating" all become "creat". It leaves stems of at least
// three letters.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "shes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "xes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
	case len(w) > 3 && strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	switch {
	case len(w) >= 6 && strings.HasSuffix(w, "ing"):
		w = undouble(w[:len(w)-3])
	case len(w) >= 5 && strings.HasSuffix(w, "ed"):
		w = undouble(w[:len(w)-2])
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
}

// undouble drops the last letter of a stem that ends in a doubled
// consonant ("runn" of "running"), but not of one in "ll", "ss" or "zz".
func undouble(w string) string {
	n := len(w)
	if n >= 2 && w[n-1] == w[n-2] && !strings.ContainsRune("aeioulsz", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}
