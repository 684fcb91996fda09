package main

import (
	"fmt"
	"strings"
)

// padToolsPerMiB is how many padding tools of -huge-catalog make a MiB.
const padToolsPerMiB = 16

// padTool returns padding tool i of -huge-catalog: about 1/padToolsPerMiB
// MiB of JSON, made anew each time so that the catalog is never held whole.
func padTool(i int) toolDescriptor {
	return toolDescriptor{
		Name:        fmt.Sprintf("pad_%06d", i),
		Description: strings.Repeat("x", 1<<20/padToolsPerMiB-100),
		InputSchema: inputSchema{Type: "object", Properties: map[string]property{}},
	}
}
