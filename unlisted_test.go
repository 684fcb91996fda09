package main

import (
	"strings"
	"testing"
)

func TestAServerThatDeclaresAListItDoesNotKnowIsStartedWithThatListEmpty(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	path := writeConfig(t, `{"mcpServers": {"a": {"command": "FAKE",
		"args": ["-state", "STATE", "-lifetime", "2m", "-unlisted", "resources,prompts"]}}}`, dir)
	gw, log := startGatewayLogging(t, path, dir)
	b := gw.backends[0]
	<-b.firstDone
	if h := b.health(); h.State != stateReady || h.Restarts != 0 {
		t.Fatalf("health = %+v, want ready without a restart:\n%s", h, log.String())
	}
	if len(b.items(kindTool)) == 0 || len(b.items(kindResource)) != 0 || len(b.items(kindPrompt)) != 0 || len(b.items(kindTemplate)) != 0 {
		t.Errorf("items: %d tools, %d resources, %d prompts, %d templates; want tools and nothing else",
			len(b.items(kindTool)), len(b.items(kindResource)), len(b.items(kindPrompt)), len(b.items(kindTemplate)))
	}
	for _, method := range []string{"resources/list", "prompts/list"} {
		if n := strings.Count(log.String(), "level=WARN msg=\"the server declared a capability but does not know its list method"); n != 2 ||
			!strings.Contains(log.String(), "server=a method="+method) {
			t.Errorf("the log holds %d warnings, want one naming server a and %s:\n%s", n, method, log.String())
		}
	}
}
