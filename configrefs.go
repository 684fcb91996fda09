package main

// This file holds the references a config's values may hold: ${NAME} and
// ${env:NAME} for environment variables, ${file:PATH} for a secret kept in a
// file (as Kubernetes and Docker mount them), the two VS Code variables
// corral can know (${workspaceFolder}, ${userHome}), and a clear error for
// those it cannot (${input:ID}, and VS Code's other variables).

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// maxSecretFileBytes bounds a file read for ${file:PATH}, authTokenFile or
// envFile: a secret is a token or a key, not a document, and a config must
// not make corral read a whole disk.
const maxSecretFileBytes = 64 << 10

// A refLookup resolves one reference of a value. Kind is "" for an environment
// variable (${NAME} or ${env:NAME}; arg is NAME), else the word before the
// colon of ${kind:arg}. It reports whether a variable is set; a non-nil err
// is the whole problem with the reference, which the caller prefixes with it.
type refLookup func(kind, arg string) (value string, ok bool, err error)

// expand returns s with each ${NAME} (or ${env:NAME}, as VS Code writes it)
// replaced by the value of the environment variable NAME, looked up with
// getenv, and each ${NAME:-default} replaced by that value or, if the
// variable is unset or empty, by default, taken literally. "$$" stands for a
// literal "$", and a "$" followed by anything else than "{" or "$" is kept
// as is. A value from the environment is not expanded again.
//
// It is an error for NAME to be unset (without a default), for it not to be a
// valid name (a letter or '_', then letters, digits and '_'), for "${" to
// have no closing "}", or for a reference to be of another kind (such as
// ${file:PATH}, which only the parser, knowing the config's directory and
// the field, resolves).
func expand(s string, getenv func(string) (string, bool)) (string, error) {
	return expandRefs(s, func(kind, arg string) (string, bool, error) {
		if kind != "" {
			return "", false, unknownKind(kind)
		}
		v, ok := getenv(arg)
		return v, ok, nil
	})
}

// expandRefs is expand with every reference resolved by look.
func expandRefs(s string, look refLookup) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$$"):
			b.WriteByte('$')
			s = s[2:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated %q; close it with \"}\", or write \"$$\" for a literal \"$\"", s)
			}
			v, err := resolveRef(s[:end+1], look)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			s = s[end+1:]
		default:
			b.WriteByte('$')
			s = s[1:]
		}
	}
}

// resolveRef returns the value of ref, a whole "${...}". A ":" after a word
// makes it a reference of that kind, unless it starts ":-", a default.
func resolveRef(ref string, look refLookup) (string, error) {
	body := ref[2 : len(ref)-1]
	if kind, arg, ok := strings.Cut(body, ":"); ok && isWord(kind) && !strings.HasPrefix(arg, "-") {
		if kind != "env" {
			v, _, err := look(kind, arg)
			if err != nil {
				return "", fmt.Errorf("%s: %w", ref, err)
			}
			return v, nil
		}
		body = arg
	}
	name, def, hasDefault := strings.Cut(body, ":-")
	if !validVarName(name) {
		return "", fmt.Errorf("invalid variable name %q in %s; a name is letters, digits and '_', not starting with a digit (write \"$$\" for a literal \"$\")", name, ref)
	}
	v, ok, err := look("", name)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", ref, err)
	case hasDefault && v == "":
		v = def
	case !ok:
		return "", unsetError(ref, name)
	}
	return v, nil
}

// vscodeVariables are the names of VS Code's predefined variables that
// corral does not resolve, for the message when one is not set either as an
// environment variable. (${workspaceFolder} and ${userHome} it resolves.)
var vscodeVariables = []string{
	"cwd", "defaultBuildTask", "execPath", "file", "fileBasename", "fileBasenameNoExtension",
	"fileDirname", "fileDirnameBasename", "fileExtname", "fileWorkspaceFolder", "lineNumber",
	"pathSeparator", "relativeFile", "relativeFileDirname", "selectedText", "workspaceFolderBasename",
}

// unsetError is the error for ref, a reference to the variable name, which
// is not set.
func unsetError(ref, name string) error {
	switch {
	case name == "workspaceFolder":
		return fmt.Errorf("%s is VS Code's workspace folder, which corral knows only when the config file is in a .vscode or .cursor directory (it is then the folder holding that directory); write the path instead", ref)
	case slices.Contains(vscodeVariables, name):
		return fmt.Errorf("%s is a VS Code variable, which corral does not resolve; write its value instead", ref)
	}
	return fmt.Errorf("%s is not set; export it, or write ${%s:-default}", ref, name)
}

// unknownKind is the error for a ${kind:...} reference corral does not know.
func unknownKind(kind string) error {
	return fmt.Errorf("corral does not resolve ${%s:...} (VS Code's kinds other than env and input need VS Code); write the value, or use ${NAME}, ${env:NAME} or ${file:PATH}", kind)
}

// isWord reports whether s is a non-empty run of ASCII letters.
func isWord(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

// validVarName reports whether name is a valid environment variable name in
// a ${NAME} reference.
func validVarName(name string) bool {
	if name == "" || '0' <= name[0] && name[0] <= '9' {
		return false
	}
	for _, r := range name {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// expand expands the references in *value, the field of server s, in place,
// and records in s.shown how -check prints the field: with "****" for each
// reference's value, whatever it is, since it may be a secret.
func (p *parser) expand(s *ServerConfig, field string, value *string) {
	v, err := expandRefs(*value, p.lookup(field))
	if err != nil {
		p.errorf(s.name, field, "%v", err)
		return
	}
	if strings.Contains(*value, "${") {
		if s.shown == nil {
			s.shown = map[string]string{}
		}
		s.shown[field], _ = expandRefs(*value, p.shownLookup)
	}
	*value = v
}

// shownLookup resolves a reference as -check shows it: "****" for each,
// since it may be a secret, but for ${workspaceFolder} and ${userHome},
// which are not, and which a person checking a config wants to see.
func (p *parser) shownLookup(kind, arg string) (string, bool, error) {
	if kind == "" && (arg == "workspaceFolder" || arg == "userHome") {
		if v, ok, err := p.variable(arg); ok && err == nil {
			return v, true, nil
		}
	}
	return secretMask, true, nil
}

// lookup returns how the references of field, in a server entry, resolve:
// ${file:PATH} only in env and headers values.
func (p *parser) lookup(field string) refLookup {
	return func(kind, arg string) (string, bool, error) {
		switch kind {
		case "":
			return p.variable(arg)
		case "file":
			v, err := p.secretFile(field, arg)
			return v, err == nil, err
		case "input":
			return "", false, errors.New("VS Code prompts the user for an input, which corral cannot do; put the value in an environment variable and write ${env:NAME}, or in a file and write ${file:PATH}")
		}
		return "", false, unknownKind(kind)
	}
}

// variable returns the value of the variable name: VS Code's (and Cursor's)
// workspaceFolder, for a config file in a .vscode or .cursor directory, or
// userHome ($HOME), else the environment variable name.
func (p *parser) variable(name string) (string, bool, error) {
	switch name {
	case "workspaceFolder":
		if dir := filepath.Dir(p.path); filepath.Base(dir) == ".vscode" || filepath.Base(dir) == ".cursor" {
			ws, err := filepath.Abs(filepath.Dir(dir))
			return ws, err == nil, err
		}
	case "userHome":
		if home, ok := p.getenv("HOME"); ok && home != "" {
			return home, true, nil
		}
	}
	v, ok := p.getenv(name)
	return v, ok, nil
}

// secretFile returns the content of the file named by a ${file:PATH} in
// field, checked for what the field can hold.
func (p *parser) secretFile(field, name string) (string, error) {
	env, header := strings.HasPrefix(field, "env."), strings.HasPrefix(field, "headers.")
	switch {
	case !env && !header:
		return "", errors.New("a file is read only in env and headers values, so that a secret never shows in a command line, which other local users can read; pass it to the server in env")
	case strings.Contains(name, "${"):
		return "", errors.New("a path holds no references; write it literally (a relative path is relative to the config file's directory)")
	case name == "":
		return "", errors.New("no path; write ${file:PATH}")
	}
	v, err := readSecretFile(filepath.Dir(p.path), name)
	if err != nil {
		return "", err
	}
	switch {
	case env && strings.ContainsRune(v, 0):
		return "", fmt.Errorf("the file holds a NUL byte, which an environment variable cannot")
	case header && strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		return "", fmt.Errorf("the file holds a line break or another control character, which a header value cannot (only its trailing line breaks are removed)")
	}
	return v, nil
}

// readSecretFile returns the content of the file name (relative to dir when
// not absolute), without its trailing line breaks ("\n" or "\r\n"), as
// mounted Kubernetes and Docker secrets are read. It refuses what is not a
// regular file (a FIFO would block corral; see readRegular) and a file over
// maxSecretFileBytes. Its errors start with the file's path, and never hold
// its content.
func readSecretFile(dir, name string) (string, error) {
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	data, err := readRegular(path, maxSecretFileBytes)
	switch {
	case errors.Is(err, errNotRegular):
		return "", fmt.Errorf("%s is not a regular file; name the file that holds the secret", path)
	case errors.Is(err, errTooLarge):
		return "", fmt.Errorf("%s is over %d bytes (64 KiB), the most corral reads for a secret", path, maxSecretFileBytes)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}
