package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// ReadJSONLines reads the results of one run, as -json wrote them.
func ReadJSONLines(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []Result
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}

// Table is the Markdown table of several runs, a column each, and under it
// every failure's and skip's reason: conformance/README.md's results.
func Table(runs [][]Result) string {
	var b strings.Builder
	cases := map[string]bool{}
	verdicts := make([]map[string]Result, len(runs))
	b.WriteString("| case |")
	for i, rs := range runs {
		verdicts[i] = map[string]Result{}
		for _, r := range rs {
			cases[r.Case] = true
			verdicts[i][r.Case] = r
		}
		fmt.Fprintf(&b, " %s |", runTitle(rs))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(runs)) + "\n")
	var names []string
	for c := range cases {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		fmt.Fprintf(&b, "| %s |", c)
		for i := range runs {
			if r, ok := verdicts[i][c]; ok {
				fmt.Fprintf(&b, " %s |", verdictCell(r.Verdict))
			} else {
				b.WriteString(" not run |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| **total** |")
	for _, rs := range runs {
		p, f, s := Counts(rs)
		fmt.Fprintf(&b, " %d passed, %d failed, %d skipped |", p, f, s)
	}
	b.WriteString("\n")
	for _, rs := range runs {
		var lines []string
		for _, r := range rs {
			if r.Verdict != "pass" {
				lines = append(lines, fmt.Sprintf("- `%s` (%s): %s", r.Case, r.Verdict, cell(r.Reason, 300)))
			}
		}
		if len(lines) > 0 {
			sort.Strings(lines)
			fmt.Fprintf(&b, "\n**%s**, every failure and skip, with the reason the case gave:\n\n%s\n", runTitle(rs), strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// runTitle names a run by its gateway, version and date.
func runTitle(rs []Result) string {
	if len(rs) == 0 {
		return "(empty run)"
	}
	return fmt.Sprintf("%s (%s)", gatewayTitle(rs[0].Gateway, rs[0].Version), rs[0].Date)
}

// ReplaceTable replaces what lies between the lines "<!-- begin NAME -->"
// and "<!-- end NAME -->" of file with table.
func ReplaceTable(file, name, table string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	out, err := replaceBetween(string(data), name, table)
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	return os.WriteFile(file, []byte(out), 0o644)
}

func replaceBetween(doc, name, table string) (string, error) {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc[max(i, 0):], end) + max(i, 0)
	if i < 0 || j < i {
		return "", fmt.Errorf("no lines %q and %q to put the table between", strings.TrimSpace(begin), end)
	}
	return doc[:i+len(begin)] + table + doc[j:], nil
}

// Between returns what lies between the markers of name in doc.
func Between(doc, name string) (string, bool) {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc[max(i, 0):], end) + max(i, 0)
	if i < 0 || j < i {
		return "", false
	}
	return doc[i+len(begin) : j], true
}
