package main

// What the HTTP front ends do on every request, kept to what corral needs.

// versionHeader is the name of the MCP-Protocol-Version header in the
// canonical form net/http keys headers by: Header.Get with any other
// spelling makes the canonical one anew on every call.
const versionHeader = "Mcp-Protocol-Version"
