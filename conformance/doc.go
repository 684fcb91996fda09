// Package conformance is a black-box test suite for MCP gateways: programs
// that run stdio MCP servers as child processes and serve their tools to MCP
// clients. It starts the gateway under test with fakeserver children, drives
// it as a client, and checks lifecycle guarantees, and that MCP beyond tools
// (progress, a server's requests to its client, resources, prompts,
// cancellation) passes through, from the outside: what clients receive, and
// what the fake servers record about themselves and what /proc says of them.
//
// The cases are ordinary Go tests in the package's non-test files, listed
// in registry.go. go test runs them against corral, built from the parent
// directory, or against any gateway through an adapter file:
//
//	go test ./conformance
//	go test ./conformance -run /CrashLoop -args -adapter adapters/supergateway.json
//
// and the command cmd/corral-conformance runs them without a clone,
// writing JUnit XML, Markdown and JSON lines:
//
//	go run github.com/corral-mcp/corral/conformance/cmd/corral-conformance@latest -adapter adapter.json -junit junit.xml
//
// README.md documents the adapter format, how to add a case, and records
// results.
package conformance
