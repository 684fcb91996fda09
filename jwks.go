package main

// This file holds JSON Web Key Sets (RFC 7517) as an authorization server
// publishes them for its tokens: the keys corral can verify with (RSA of
// 2048 to 8192 bits, P-256, Ed25519), each with the algorithms it allows,
// fixed by the key and never by a token. A key of another kind, for
// encryption, or with an algorithm corral does not verify is skipped, so
// that one such key does not make the whole set useless.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
)

// The bounds of a key set.
const (
	// maxJWKSBytes bounds a key set as fetched; real ones are a few KiB.
	maxJWKSBytes = 256 << 10
	// maxJWKSKeys bounds the keys of a set: a token without a kid is
	// tried against each key that allows its algorithm.
	maxJWKSKeys = 64
	// minRSABits and maxRSABits bound an RSA key (RFC 7518, section 3.3
	// asks for 2048 at least; a huge one costs time at every token).
	minRSABits = 2048
	maxRSABits = 8192
)

// A jwk is one verification key of a set.
type jwk struct {
	kid  string
	algs []string // the algorithms it verifies: its own alg, or those of its kind
	pub  crypto.PublicKey
}

// allows reports whether k verifies tokens signed with alg.
func (k *jwk) allows(alg string) bool { return slices.Contains(k.algs, alg) }

// parseJWKS reads data, a JWK Set, and returns the keys corral can verify
// with, and what it skipped and why (for the log). It refuses data over
// maxJWKSBytes, data that is not a JSON object with an array "keys", more
// than maxJWKSKeys keys, and a set in which no key is usable. It is safe
// for concurrent use.
func parseJWKS(data []byte) (keys []*jwk, skipped []string, err error) {
	if len(data) > maxJWKSBytes {
		return nil, nil, fmt.Errorf("the key set is more than %d bytes", maxJWKSBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, fmt.Errorf("the key set is not a JSON object with \"keys\": %v", err)
	}
	if len(set.Keys) > maxJWKSKeys {
		return nil, nil, fmt.Errorf("the key set has %d keys, more than %d", len(set.Keys), maxJWKSKeys)
	}
	for i, raw := range set.Keys {
		k, err := parseJWK(raw)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d: %v", i, err))
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("the key set has no key corral can verify with (RSA, P-256 or Ed25519, for signing); skipped: %q", skipped)
	}
	return keys, skipped, nil
}

// parseJWK reads one key of a set.
func parseJWK(raw json.RawMessage) (*jwk, error) {
	var j struct {
		Kty, Kid, Use, Alg, Crv string
		N, E, X, Y              string
		KeyOps                  []string `json:"key_ops"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, errors.New("not a JSON object of string members")
	}
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("use %q: not a signing key", j.Use)
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return nil, fmt.Errorf("key_ops %q: not for verify", j.KeyOps)
	}
	k := &jwk{kid: j.Kid}
	var kinds []string // the algorithms of the key's kind
	switch j.Kty {
	case "RSA":
		n, err1 := b64uint(j.N)
		e, err2 := b64uint(j.E)
		switch {
		case err1 != nil || err2 != nil:
			return nil, errors.New("RSA n or e is not base64url")
		case n.BitLen() < minRSABits || n.BitLen() > maxRSABits:
			return nil, fmt.Errorf("RSA key of %d bits; want %d to %d", n.BitLen(), minRSABits, maxRSABits)
		case !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0:
			return nil, errors.New("RSA exponent out of range")
		}
		k.pub, kinds = &rsa.PublicKey{N: n, E: int(e.Int64())}, []string{algRS256, algPS256}
	case "EC":
		if j.Crv != "P-256" {
			return nil, fmt.Errorf("EC curve %q; corral verifies P-256 (ES256)", j.Crv)
		}
		x, err1 := base64.RawURLEncoding.Strict().DecodeString(j.X)
		y, err2 := base64.RawURLEncoding.Strict().DecodeString(j.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return nil, errors.New("P-256 x or y is not 32 bytes of base64url")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, errors.New("P-256 point is not on the curve")
		}
		k.pub, kinds = pub, []string{algES256}
	case "OKP":
		if j.Crv != "Ed25519" {
			return nil, fmt.Errorf("OKP curve %q; corral verifies Ed25519 (EdDSA)", j.Crv)
		}
		x, err := base64.RawURLEncoding.Strict().DecodeString(j.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("Ed25519 x is not 32 bytes of base64url")
		}
		k.pub, kinds = ed25519.PublicKey(x), []string{algEdDSA}
	default:
		return nil, fmt.Errorf("kty %q; corral verifies RSA, EC and OKP keys", j.Kty)
	}
	switch {
	case j.Alg == "":
		k.algs = kinds
	case j.Alg == "Ed25519" && j.Kty == "OKP": // RFC 9864's fully specified name
		k.algs = []string{algEdDSA}
	case slices.Contains(kinds, j.Alg):
		k.algs = []string{j.Alg}
	default:
		return nil, fmt.Errorf("alg %q; a %s key verifies %q here", j.Alg, j.Kty, kinds)
	}
	return k, nil
}

// b64uint decodes s, unpadded base64url, as a big-endian unsigned integer.
func b64uint(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("not base64url")
	}
	return new(big.Int).SetBytes(b), nil
}

// keysFor returns the keys of keys that may have signed t: the one whose
// kid is t's, or, for a token without kid, every key that allows its alg.
func keysFor(keys []*jwk, t *jws) []*jwk {
	var out []*jwk
	for _, k := range keys {
		if t.kid != "" && k.kid == t.kid || t.kid == "" && k.allows(t.alg) {
			out = append(out, k)
		}
	}
	return out
}
