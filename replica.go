package main

// This file holds a replica's name and the IDs that carry it. Several
// corrals behind one load balancer each run their own copy of every server:
// a legacy session, a 2026-07-28 call waiting for its client's input
// (requestState) and a task live on the one replica that issued their ID.
// Each such ID starts with the replica's name and a '.', so that a
// balancer routes a request by a rule on that prefix alone, and a replica
// that gets another's ID can say which replica owns it.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// maxReplicaName bounds a replica's name, as a DNS label is bounded.
const maxReplicaName = 63

// checkReplicaName returns why name cannot name a replica, or nil: it must
// be 1 to 63 letters, digits, '-' or '_', so that it fits a header, a
// query parameter and a balancer's rule as it is, and holds no '.', which
// ends it in the IDs.
func checkReplicaName(name string) error {
	if name == "" || len(name) > maxReplicaName || strings.IndexFunc(name, func(r rune) bool { return !replicaRune(r) }) >= 0 {
		return fmt.Errorf("%q cannot name a replica: use 1 to %d letters, digits, '-' or '_' (it begins every session ID corral issues, followed by a '.'), such as \"corral-1\"", name, maxReplicaName)
	}
	return nil
}

func replicaRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

// defaultReplica returns the replica's name when the config gives none:
// the first label of the host name (a Kubernetes pod's name), each
// character a name may not hold replaced by '-', at most 63 of them;
// "corral" if that leaves nothing.
func defaultReplica() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	b := []byte(host)
	for i, c := range b {
		if !replicaRune(rune(c)) {
			b[i] = '-'
		}
	}
	if len(b) > maxReplicaName {
		b = b[:maxReplicaName]
	}
	if len(b) == 0 {
		return "corral"
	}
	return string(b)
}

// newReplicaID returns a new random ID issued by replica: its name, '.',
// then 32 hexadecimal digits.
func newReplicaID(replica string) string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return replica + "." + hex.EncodeToString(b[:])
}

// replicaOf returns the replica that issued id, or "" when id names none
// (an ID of a corral before replicas had names, or made up).
func replicaOf(id string) string {
	name, _, ok := strings.Cut(id, ".")
	if !ok || checkReplicaName(name) != nil {
		return ""
	}
	return name
}

// elsewhere returns the replica other than mine that issued id, or "" when
// id is mine or names no replica.
func elsewhere(id, mine string) string {
	if owner := replicaOf(id); owner != mine {
		return owner
	}
	return ""
}
