// Package conformance is a black-box test suite for MCP gateways: programs
// that run stdio MCP servers as child processes and serve their tools to MCP
// clients. It starts the gateway under test with fakeserver children, drives
// it as a client, and checks lifecycle guarantees, and that MCP beyond tools
// (progress, a server's requests to its client, resources, prompts,
// cancellation) passes through, from the outside: what clients receive, and
// what the fake servers record about themselves and what /proc says of them.
//
// By default it runs against corral, built from the parent directory:
//
//	go test ./conformance
//
// and against any other gateway through an adapter file:
//
//	go test ./conformance -adapter adapters/supergateway.json
//	CONFORMANCE_ADAPTER=adapters/supergateway.json go test ./conformance
//
// README.md documents the adapter format and records results.
package conformance
