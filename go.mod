module github.com/corral-mcp/corral

go 1.25.0
