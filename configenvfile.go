package main

// This file holds envFile, VS Code's (and Cursor's) way to give a local
// server the variables of a .env file, read as VS Code reads one.

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// loadEnvFile adds the variables of s.EnvFile, if set, to s.Env, where env
// does not set them already: env wins, as in VS Code. The file's path may
// hold references (${workspaceFolder}/.env), and is relative to the config
// file's directory; it is read as a secret file is (see readSecretFile), and
// its values are masked as env values are, and taken literally.
func (p *parser) loadEnvFile(s *ServerConfig) {
	if s.EnvFile == "" {
		return
	}
	p.expand(s, "envFile", &s.EnvFile)
	data, err := readSecretFile(filepath.Dir(p.path), s.EnvFile)
	if err != nil {
		p.errorf(s.name, "envFile", "%v", err)
		return
	}
	vars := parseEnvFile(data)
	for _, key := range slices.Sorted(maps.Keys(vars)) {
		if _, set := s.Env[key]; set {
			continue
		}
		if strings.ContainsRune(vars[key], 0) || strings.ContainsRune(key, 0) {
			p.errorf(s.name, "envFile", "the variable %q holds a NUL byte, which an environment variable cannot", key)
			continue
		}
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		if s.shown == nil {
			s.shown = map[string]string{}
		}
		s.Env[key] = vars[key]
		s.shown["env."+key] = secretMask // not written in the config (see secretWarnings)
	}
}

// parseEnvFile returns the variables of data, a .env file, as VS Code reads
// one (parseEnvFile in its src/vs/base/common/envfile.ts): a line is
// KEY=VALUE or KEY: VALUE, optionally after "export "; blank lines and lines
// starting with '#' are skipped, as are lines without a separator or with an
// empty key; a '#' outside quotes starts a comment; a value between matching
// quotes (", ' or `) loses them, and between double quotes "\n" and "\r"
// stand for a line feed and a carriage return. White space around keys and
// values is dropped. A later line wins over an earlier one.
func parseEnvFile(data string) map[string]string {
	vars := map[string]string{}
	data = strings.ReplaceAll(data, "\r\n", "\n")
	data = strings.ReplaceAll(data, "\r", "\n")
	for line := range strings.SplitSeq(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "export "); ok {
			line = strings.TrimSpace(rest)
		}
		sep := indexOutsideQuotes(line, func(c byte) bool { return c == '=' || c == ':' })
		if sep < 0 {
			continue
		}
		key, value := strings.TrimSpace(line[:sep]), strings.TrimSpace(line[sep+1:])
		if hash := indexOutsideQuotes(value, func(c byte) bool { return c == '#' }); hash >= 0 {
			value = strings.TrimSpace(value[:hash])
		}
		if n := len(value); n >= 2 && value[0] == value[n-1] && strings.IndexByte("\"'`", value[0]) >= 0 {
			quote := value[0]
			value = value[1 : n-1]
			if quote == '"' {
				value = strings.NewReplacer(`\n`, "\n", `\r`, "\r").Replace(value)
			}
		}
		if key != "" {
			vars[key] = value
		}
	}
	return vars
}

// indexOutsideQuotes returns the index of the first byte of text, outside
// quotes (", ' or `, a quote preceded by '\' not closing one), for which
// match is true, or -1.
func indexOutsideQuotes(text string, match func(byte) bool) int {
	var quote byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote && text[i-1] != '\\' {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case match(c):
			return i
		}
	}
	return -1
}
