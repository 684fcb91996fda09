package main

// This file holds JWS in compact serialization (RFC 7515) as access tokens
// use it (RFC 7519, RFC 9068): a token split and decoded with a bound on
// every part, its header read for the algorithm and key ID alone, its
// signature checked with a key of jwks.go, and its claims read. Nothing in
// a token's header chooses a key: jku, x5u, x5c and an embedded jwk are
// never read, and the algorithm must be one the key itself allows
// (RFC 8725, section 3.1), so "none" and an HMAC keyed with a public key
// never verify.

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The bounds of a token: anything longer is refused before it is decoded.
const (
	// maxTokenBytes bounds a bearer token, JWT or opaque. Real access
	// tokens are a few KiB at most (Entra ID's with many groups are the
	// largest); a header is bounded by maxHeaderBytes anyway.
	maxTokenBytes = 16 << 10
	// maxJWTHeaderBytes bounds a JWT's header, decoded.
	maxJWTHeaderBytes = 2 << 10
)

// The algorithms corral verifies (RFC 7518, section 3.1; RFC 8037).
const (
	algRS256 = "RS256"
	algPS256 = "PS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// A jws is a token in JWS compact serialization, decoded but not verified.
type jws struct {
	alg, kid string
	// signingInput is the header and payload as they came, with the dot
	// between them: what the signature signs.
	signingInput []byte
	payload      []byte
	signature    []byte
}

// looksLikeJWT reports whether token has the shape of a JWS in compact
// serialization: three parts, the first a base64url-encoded JSON object.
// An opaque token (for introspection) has not.
func looksLikeJWT(token string) bool {
	head, rest, ok := strings.Cut(token, ".")
	return ok && strings.Count(rest, ".") == 1 && strings.HasPrefix(head, "eyJ") // base64url of `{"`
}

// parseJWS splits and decodes token. It refuses a token over
// maxTokenBytes, a part that is not unpadded base64url, a header over
// maxJWTHeaderBytes or that is not a JSON object with a string "alg", a
// header with "crit" (no extension is understood, so none may be critical:
// RFC 7515, section 4.1.11), and an empty signature. It never blocks, and
// is safe for concurrent use.
func parseJWS(token string) (*jws, error) {
	if len(token) > maxTokenBytes {
		return nil, fmt.Errorf("the token is %d bytes, more than %d", len(token), maxTokenBytes)
	}
	first := strings.IndexByte(token, '.')
	last := strings.LastIndexByte(token, '.')
	if first < 0 || first == last || strings.Count(token, ".") != 2 {
		return nil, errors.New("not a JWT: want three parts separated by dots")
	}
	if first > base64.RawURLEncoding.EncodedLen(maxJWTHeaderBytes) {
		return nil, fmt.Errorf("the token's header is more than %d bytes", maxJWTHeaderBytes)
	}
	header, err := base64.RawURLEncoding.Strict().DecodeString(token[:first])
	if err != nil {
		return nil, errors.New("the token's header is not base64url")
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(token[first+1 : last])
	if err != nil {
		return nil, errors.New("the token's payload is not base64url")
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(token[last+1:])
	if err != nil || len(sig) == 0 {
		return nil, errors.New("the token's signature is missing or not base64url")
	}
	var h struct {
		Alg  *string         `json:"alg"`
		Kid  string          `json:"kid"`
		Crit json.RawMessage `json:"crit"`
	}
	if err := json.Unmarshal(header, &h); err != nil || !bytes.HasPrefix(bytes.TrimLeft(header, " \t\r\n"), []byte("{")) {
		return nil, errors.New("the token's header is not a JSON object")
	}
	if h.Alg == nil {
		return nil, errors.New("the token's header has no alg")
	}
	if h.Crit != nil {
		return nil, errors.New("the token's header has crit, naming extensions corral does not understand")
	}
	return &jws{alg: *h.Alg, kid: h.Kid, signingInput: []byte(token[:last]), payload: payload, signature: sig}, nil
}

// verify checks the signature of t with key k, under the algorithm t's
// header names, which must be one k allows: so "none", an HMAC, or an
// algorithm of another kind of key never verifies.
func (t *jws) verify(k *jwk) error {
	if !k.allows(t.alg) {
		return fmt.Errorf("the token's alg %q is not one its key (kid %q) allows (%s)", t.alg, k.kid, strings.Join(k.algs, ", "))
	}
	h := sha256.Sum256(t.signingInput)
	ok := false
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		switch t.alg {
		case algRS256:
			ok = rsa.VerifyPKCS1v15(pub, crypto.SHA256, h[:], t.signature) == nil
		case algPS256:
			// RFC 7518, section 3.5: the salt is as long as the hash.
			ok = rsa.VerifyPSS(pub, crypto.SHA256, h[:], t.signature, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}
	case *ecdsa.PublicKey:
		// RFC 7518, section 3.4: R and S, 32 bytes each, not ASN.1.
		if len(t.signature) == 64 {
			r, s := new(big.Int).SetBytes(t.signature[:32]), new(big.Int).SetBytes(t.signature[32:])
			ok = ecdsa.Verify(pub, h[:], r, s)
		}
	case ed25519.PublicKey:
		ok = ed25519.Verify(pub, t.signingInput, t.signature)
	}
	if !ok {
		return errors.New("the token's signature does not verify")
	}
	return nil
}

// jwtClaims are the claims of an access token corral reads.
type jwtClaims struct {
	iss, sub, clientID string
	aud                []string
	exp, nbf           time.Time // zero if absent
	scopes, groups     []string
}

// parseClaims reads the claims of payload, a JWT's: iss, sub, aud (a
// string or an array of strings), exp and nbf (NumericDate: seconds,
// possibly with a fraction), the client (client_id, else azp, else Entra
// ID's appid), the scopes (scope, space-separated, else scp, a string or
// an array) and the groups (the claim groupsClaim names). A claim of the
// wrong type is an error, never read as absent.
func parseClaims(payload []byte, groupsClaim string) (*jwtClaims, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil || m == nil {
		return nil, errors.New("the token's claims are not a JSON object")
	}
	c := &jwtClaims{}
	var err error
	str := func(name string) string {
		var s string
		if raw, ok := m[name]; ok && err == nil {
			if e := json.Unmarshal(raw, &s); e != nil {
				err = fmt.Errorf("the token's %s is not a string", name)
			}
		}
		return s
	}
	c.iss, c.sub = str("iss"), str("sub")
	c.clientID = firstSet(str("client_id"), str("azp"), str("appid"))
	if scope := str("scope"); scope != "" {
		c.scopes = strings.Fields(scope)
	} else if raw, ok := m["scp"]; ok && err == nil {
		c.scopes, err = stringOrStrings("scp", raw)
		if len(c.scopes) == 1 {
			c.scopes = strings.Fields(c.scopes[0])
		}
	}
	if raw, ok := m["aud"]; ok && err == nil {
		c.aud, err = stringOrStrings("aud", raw)
	}
	if raw, ok := m[groupsClaim]; ok && err == nil {
		c.groups, err = stringOrStrings(groupsClaim, raw)
	}
	if raw, ok := m["exp"]; ok && err == nil {
		c.exp, err = numericDate("exp", raw)
	}
	if raw, ok := m["nbf"]; ok && err == nil {
		c.nbf, err = numericDate("nbf", raw)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// stringOrStrings reads raw, the claim name, as a string or an array of
// strings.
func stringOrStrings(name string, raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("the token's %s is neither a string nor an array of strings", name)
	}
	return many, nil
}

// numericDate reads raw, the claim name, as a NumericDate (RFC 7519,
// section 2): seconds since the epoch, possibly with a fraction.
func numericDate(name string, raw json.RawMessage) (time.Time, error) {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1<<40 {
		return time.Time{}, fmt.Errorf("the token's %s is not a date (seconds since 1970)", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// check checks c's iss, aud, exp and nbf: iss is issuer exactly, aud holds
// audience, and now is before exp and not before nbf, each give or take
// leeway. exp is required: a token that never expires is refused.
func (c *jwtClaims) check(issuer, audience string, now time.Time, leeway time.Duration) error {
	switch {
	case c.iss != issuer:
		return fmt.Errorf("the token's iss %q is not the issuer corral trusts (%s)", c.iss, issuer)
	case len(c.aud) == 0:
		return fmt.Errorf("the token has no aud; it must name %s (ask for it as resource, RFC 8707)", audience)
	case !slices.ContainsFunc(c.aud, func(a string) bool { return a == audience || sameResource(a, audience) }):
		return fmt.Errorf("the token's aud %q does not name %s: it was issued for another resource", c.aud, audience)
	case c.exp.IsZero():
		return errors.New("the token has no exp")
	case !now.Before(c.exp.Add(leeway)):
		return fmt.Errorf("the token expired at %s", c.exp.UTC().Format(time.RFC3339))
	case !c.nbf.IsZero() && now.Add(leeway).Before(c.nbf):
		return fmt.Errorf("the token is not valid before %s", c.nbf.UTC().Format(time.RFC3339))
	}
	return nil
}

// sameResource reports whether a and b name one resource, as the MCP
// specification (2025-11-25) asks a server to read a resource URI: the
// scheme and host in any case, and a final slash of the path or none.
func sameResource(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" || ua.Opaque != "" || ub.Opaque != "" {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host) &&
		strings.TrimSuffix(ua.EscapedPath(), "/") == strings.TrimSuffix(ub.EscapedPath(), "/") &&
		ua.RawQuery == ub.RawQuery && ua.Fragment == "" && ua.User == nil
}
