package conformance

import (
	"encoding/xml"
	"fmt"
	"os"
	"time"
)

// The JUnit XML the reports use: the common subset that GitHub Actions'
// test reporters, GitLab and Jenkins read. A case is a testcase; a failure
// and a skip carry the case's reason as their message.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Hostname   string          `xml:"hostname,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure"`
	Skipped   *junitMessage `xml:"skipped"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnit writes rs as a JUnit XML document: one testsuite for the gateway,
// started at start, lasting wall.
func JUnit(rs []Result, start time.Time, wall time.Duration) []byte {
	host, _ := os.Hostname()
	_, f, s := Counts(rs)
	secs := func(x float64) string { return fmt.Sprintf("%.3f", x) }
	suite := junitSuite{
		Name:  "conformance: " + adapter.Name,
		Tests: len(rs), Failures: f, Skipped: s,
		Time:      secs(wall.Seconds()),
		Timestamp: start.UTC().Format("2006-01-02T15:04:05"),
		Hostname:  host,
		Properties: []junitProperty{
			{"gateway", adapter.Name}, {"version", adapter.version}, {"adapter", adapter.file}, {"platform", Platform()},
		},
	}
	for _, r := range rs {
		c := junitCase{Name: r.Case, Classname: "conformance." + adapter.Name, Time: secs(r.Seconds)}
		switch r.Verdict {
		case "fail":
			c.Failure = &junitMessage{Message: r.Reason, Type: "guarantee", Text: r.Reason}
		case "skip":
			c.Skipped = &junitMessage{Message: r.Reason}
		}
		suite.Cases = append(suite.Cases, c)
	}
	doc := junitSuites{Name: "corral-conformance", Tests: len(rs), Failures: f, Skipped: s, Time: suite.Time, Suites: []junitSuite{suite}}
	out, _ := xml.MarshalIndent(doc, "", "  ")
	return append([]byte(xml.Header), append(out, '\n')...)
}
