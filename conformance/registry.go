package conformance

import "testing"

// registry is the suite: every case, with what it guarantees in one line
// (the command's -list). A case's name is its function's without "Test".
//
// To add a case (README.md, "Adding a case"): write it in a non-test file
// of this package as func TestGuaranteeAsAName(t *testing.T) that calls
// guarantee(t) first, and add it here with its line. A case in a _test.go
// file runs under go test only; the command cannot see it.
// TestRegistryListsEveryCase fails for a case left out.
var registry = []struct {
	run       func(*testing.T)
	guarantee string
}{
	// catalog and routing
	{TestCatalogListsEveryServersToolsByTheAdaptersNamingRule, "every server's tools are listed once each, under the adapter's naming rule, through every page"},
	{TestRoutingSendsEachCallToTheServerThatOwnsTheTool, "each call reaches the server that owns the tool"},
	{TestPrefixedNameBelongsToItsPrefixsServer, "a name in a prefix's namespace reaches the prefix's server, even when another server lists it"},
	{TestTwoServersCannotShareAPrefix, "two servers given one prefix are refused, or never both reached"},
	{TestUnknownToolIsAnErrorAndTheGatewayKeepsWorking, "an unknown tool is an error, and the next call works"},
	{TestURIsInResultsReadBack, "every resource URI a result gives a client reads back"},
	{TestTasksReachTheirServerAndOnlyTheirSession, "tasks of two servers with colliding IDs reach their own server, and only their own session"},
	// the protocol
	{TestIDsThatAreNotStringsOrIntegersAreRefused, "request IDs that are not strings or integers get -32600 and never reach a server"},
	{TestMultiplexingReturnsEveryAnswerToItsCallerWithItsOwnID, "1,000 concurrent calls with colliding IDs each get their own answer under their own ID"},
	{TestBadInputGetsTheSpecsAnswerAndTheGatewayKeepsServing, "malformed input gets the specification's status and JSON-RPC error, and the gateway keeps serving"},
	{TestStatelessClientsOf20260728AreServedAndCanCancel, "2026-07-28 clients without a session are served and can cancel"},
	{TestLegacySSEFrontEndAnswersOnTheStreamAndItsClosingCancelsCalls, "a legacy SSE stream gets its answers, and closing it cancels its calls"},
	{TestLargeMessagesArriveIntact, "1 MiB and 16 MiB answers and a 1 MiB request arrive byte for byte"},
	// passing MCP through
	{TestProgressReachesOnlyItsCallerWithItsOwnToken, "progress reaches only its caller, with its own token, in order, before the answer"},
	{TestSamplingRequestReachesTheCallingSessionAndItsAnswerTheServer, "a server's sampling request reaches the calling session only, and its answer the server"},
	{TestResourcesAndPromptsPassThrough, "resources and prompts are listed and read as the server gives them"},
	{TestCancellationReachesTheServer, "a client's cancellation reaches the server under the server's ID, and only for that call"},
	{TestServerRequestFloodIsBoundedAndTheGatewayKeepsServing, "a flood of server requests is answered, holds no memory, and others keep being served"},
	// timeouts and crashes
	{TestTimeoutFailsTheCallInTimeAndCancelsItOnTheServer, "a call that never answers fails in time and is cancelled at the server"},
	{TestCrashFailsPendingCallsPromptlyAndTheServerComesBack, "a crash fails pending calls at once, and the server is restarted"},
	{TestCrashLoopRestartsSlowDownAndStopWhileOthersServe, "a server crashing at every start is restarted with growing delays, then given up on, while others serve"},
	{TestServerThatNeverFinishesStartingIsGivenUpOn, "a server that never finishes starting is given up on, while others serve"},
	{TestRemoteServersAreServedAndComeBackAfterTheyGoAway, "remote (HTTP and SSE) servers are served, and served again after they restart"},
	// hostile servers and clients
	{TestStderrFloodDoesNotStallTheServer, "10 MiB on a server's stderr does not block it"},
	{TestStderrFloodIsNotCopiedUnboundedIntoTheGatewaysLog, "a server's stderr flood grows the gateway's log by at most a tenth of it"},
	{TestGarbageOnStdoutDoesNotBreakTheServer, "lines that are not JSON on a server's stdout do not break it"},
	{TestHugeCatalogDoesNotTakeTheGatewaysMemoryOrStopOthers, "a 256 MiB catalog neither takes the gateway's memory nor stops other servers"},
	{TestClientThatStopsReadingDoesNotPinTheGatewaysMemory, "a client that stops reading pins no memory and stops no other session"},
	// processes
	{TestSIGTERMLeavesNoProcessOfAnyServersTree, "after SIGTERM the gateway exits in time, and no process of any server's tree is left"},
	{TestCrashAndRestartLeaveNoProcessOfTheDeadServersTree, "a crashed server's descendants are gone after its restart"},
	{TestSIGTERMDuringBackoffStartsNothing, "SIGTERM while a server waits to be restarted starts nothing, and leaves nothing"},
	{TestSIGTERMWithCallsInFlightAnswersEachAndExitsInTime, "SIGTERM with calls in flight answers each, and the gateway exits in time"},
	{TestSIGKILLedGatewayLeavesNoServerRunning, "a gateway killed with SIGKILL leaves no server running"},
	// containment
	{TestForkBombStopsAtThePidsLimitAndOthersKeepServing, "a fork bomb stops at the pids limit, and others keep serving"},
	{TestServerOverItsMemoryLimitIsKilledAndRestartedAndItsCallerTold, "a server over its memory limit is killed and restarted, and its caller told why"},
	{TestCrashLeavesNoProcessOfTheServerEvenOneThatClearedItsEnvironment, "a crash leaves no descendant, even one that left its group and cleared its environment"},
	{TestSandboxedServerHasNoNetwork, "a server run without network cannot reach the host's"},
	// scopes and clients
	{TestSessionScopedServerRunsAProcessPerSession, "a session-scoped server runs a process per session"},
	{TestSessionScopedServersProcessEndsWithItsSession, "a session-scoped server's process ends with its session"},
	{TestSessionScopedServersRequestReachesTheSessionThatOwnsTheProcess, "a session-scoped server's request reaches the session that owns its process"},
	{TestProfilesFilterListsAndRefuseCallsOutsideThem, "a client's profile filters what it lists and refuses calls outside it"},
	{TestAProcessPerClientWithItsOwnEnv, "a client-scoped server runs a process per named client, with that client's env"},
	{TestAuditLinesMatchCalls, "the audit trail has a line per call, with its client, tool and outcome"},
	// tool context
	{TestSearchModeNeverRevealsOrCallsAToolOutsideAView, "in search mode, find_tools and call_tool never reveal or call a tool outside a client's view"},
	{TestToolOverridesRenameHideAndFixArgumentsAsTheClientSeesThem, "a server's tool overrides rename, hide and fix arguments as the client sees them, and calls map back"},
	// 2026-07-28 and tracing
	{TestParamHeadersOf20260728AreCheckedAgainstTheBody, "a 2026-07-28 client's Mcp-Param headers are checked against its arguments, and invalid annotations left out"},
	{TestTraceContextGoesThroughTheGatewayInOneTrace, "a client's trace context reaches the server in the same trace, with the gateway's own span between"},
	// authorization
	{TestOAuthChallengeNamesTheResourceMetadataAndTheIssuersTokenIsAccepted, "a request without a token gets 401 naming the resource metadata, which names the issuer, whose token is accepted"},
}
