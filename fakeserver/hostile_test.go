package main

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestHugeCatalogListsItsMiBsAPageAtATime(t *testing.T) {
	p := start(t, "-huge-catalog", "3")
	p.initialize("2025-11-25")
	var cursor string
	pads, bytes, biggest := 0, 0, 0
	for id := 1; ; id++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		p.request(id, "tools/list", params)
		m := p.expect(id)
		var r struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil {
			t.Fatal(err)
		}
		bytes += len(m.Result)
		biggest = max(biggest, len(m.Result))
		for _, tool := range r.Tools {
			if tool.Name == fmt.Sprintf("pad_%06d", pads) {
				pads++
			}
		}
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	if pads != 3*padToolsPerMiB || bytes < 3<<20 || biggest > 1<<20+64<<10 {
		t.Errorf("listed %d padding tools in order, %d bytes, pages up to %d bytes; want %d tools, at least 3 MiB, pages of at most about 1 MiB", pads, bytes, biggest, 3*padToolsPerMiB)
	}
}
