package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The vectors of RFC 7515 appendices A.2 (RS256) and A.3 (ES256), and of
// RFC 8037 appendix A.4 (Ed25519), each with its public key as a JWK.
var jwsVectors = []struct {
	name, key, token string
}{
	{"RFC 7515 A.2 RS256",
		`{"kty":"RSA","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ","e":"AQAB"}`,
		"eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"},
	{"RFC 7515 A.3 ES256",
		`{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}`,
		"eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"},
	{"RFC 8037 A.4 Ed25519",
		`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`,
		"eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"},
}

func TestTheRFCsJWSVectorsVerifyAndOneFlippedBitDoesNot(t *testing.T) {
	for _, v := range jwsVectors {
		t.Run(v.name, func(t *testing.T) {
			keys, _, err := parseJWKS([]byte(`{"keys":[` + v.key + `]}`))
			if err != nil {
				t.Fatalf("parseJWKS: %v", err)
			}
			tok, err := parseJWS(v.token)
			if err != nil {
				t.Fatalf("parseJWS: %v", err)
			}
			if err := tok.verify(keys[0]); err != nil {
				t.Errorf("verify = %v, want nil", err)
			}
			tok.signature[len(tok.signature)/2] ^= 1
			if err := tok.verify(keys[0]); err == nil {
				t.Errorf("verify of a signature with a flipped bit = nil, want an error")
			}
		})
	}
	// A.2's claims are read as a JWT's: iss, and exp as a date.
	tok, _ := parseJWS(jwsVectors[0].token)
	c, err := parseClaims(tok.payload, "groups")
	if err != nil || c.iss != "joe" || c.exp.Unix() != 1300819380 {
		t.Errorf("parseClaims(A.2) = %+v, %v; want iss joe, exp 1300819380", c, err)
	}
}

// testKeys are the signing keys of the tests' issuers, made once: an RSA
// key takes a while to make.
var testKeys = sync.OnceValue(func() (k struct {
	rsa, rsa2 *rsa.PrivateKey
	ec        *ecdsa.PrivateKey
	ed        ed25519.PrivateKey
}) {
	k.rsa, _ = rsa.GenerateKey(rand.Reader, 2048)
	k.rsa2, _ = rsa.GenerateKey(rand.Reader, 2048)
	k.ec, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, k.ed, _ = ed25519.GenerateKey(rand.Reader)
	return k
})

// b64 is unpadded base64url.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// rsaJWK, ecJWK and edJWK return the public JWK of a key, with kid and alg
// (alg omitted if "").
func rsaJWK(k *rsa.PrivateKey, kid, alg string) map[string]any {
	m := map[string]any{"kty": "RSA", "kid": kid, "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes()), "use": "sig"}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

func ecJWK(k *ecdsa.PrivateKey, kid string) map[string]any {
	pub, _ := k.PublicKey.Bytes() // 0x04 || x || y
	return map[string]any{"kty": "EC", "crv": "P-256", "kid": kid, "x": b64(pub[1:33]), "y": b64(pub[33:])}
}

func edJWK(k ed25519.PrivateKey, kid string) map[string]any {
	return map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(k.Public().(ed25519.PublicKey))}
}

// signJWT returns a compact JWS of claims with header (alg, kid and any
// more members), signed with key under alg; for "HS256" key is the HMAC
// key ([]byte), for "none" the signature is empty.
func signJWT(t testing.TB, header map[string]any, claims map[string]any, key any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	switch header["alg"] {
	case algRS256:
		sig, err = rsa.SignPKCS1v15(nil, key.(*rsa.PrivateKey), crypto.SHA256, sum[:])
	case algPS256:
		sig, err = rsa.SignPSS(rand.Reader, key.(*rsa.PrivateKey), crypto.SHA256, sum[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	case algES256:
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, key.(*ecdsa.PrivateKey), sum[:])
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	case algEdDSA:
		sig = ed25519.Sign(key.(ed25519.PrivateKey), []byte(input))
	case "HS256":
		m := hmac.New(sha256.New, key.([]byte))
		m.Write([]byte(input))
		sig = m.Sum(nil)
	case "none":
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

// testIssuer is an authorization server for tests: its metadata at RFC
// 8414's well-known URL, its key set at /jwks (what jwks holds, or as
// mode says: "huge", "slow", "invalid", "500"), and an introspection
// endpoint that knows the opaque tokens of active.
type testIssuer struct {
	url string

	mu     sync.Mutex
	jwks   []byte
	mode   string
	active map[string]map[string]any // opaque token -> its introspection answer

	jwksHits       atomic.Int32
	introspectHits atomic.Int32
}

// newTestIssuer starts an issuer whose key set holds keys.
func newTestIssuer(t testing.TB, keys ...map[string]any) *testIssuer {
	iss := &testIssuer{active: map[string]map[string]any{}}
	iss.setKeys(keys...)
	ts := httptest.NewServer(iss)
	t.Cleanup(ts.Close)
	iss.url = ts.URL
	return iss
}

func (iss *testIssuer) setKeys(keys ...map[string]any) {
	data, _ := json.Marshal(map[string]any{"keys": keys})
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.jwks = data
}

func (iss *testIssuer) setMode(mode string) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.mode = mode
}

func (iss *testIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	iss.mu.Lock()
	jwks, mode := iss.jwks, iss.mode
	iss.mu.Unlock()
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		json.NewEncoder(w).Encode(map[string]string{"issuer": iss.url, "jwks_uri": iss.url + "/jwks", "introspection_endpoint": iss.url + "/introspect"})
	case "/jwks":
		iss.jwksHits.Add(1)
		switch mode {
		case "huge":
			w.Write([]byte(`{"keys":[],"pad":"`))
			w.Write([]byte(strings.Repeat("x", maxJWKSBytes)))
			w.Write([]byte(`"}`))
		case "slow":
			<-r.Context().Done() // until corral's fetchTimeout gives up
		case "invalid":
			w.Write([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}`))
		case "500":
			http.Error(w, "down", http.StatusInternalServerError)
		default:
			w.Write(jwks)
		}
	case "/introspect":
		iss.introspectHits.Add(1)
		if id, secret, ok := r.BasicAuth(); !ok || id != "corral" || secret != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		r.ParseForm()
		iss.mu.Lock()
		a, ok := iss.active[r.PostForm.Get("token")]
		iss.mu.Unlock()
		if !ok {
			a = map[string]any{"active": false}
		}
		json.NewEncoder(w).Encode(a)
	default:
		http.NotFound(w, r)
	}
}

// testResource is the resource the tests' corral names.
const testResource = "http://127.0.0.1/mcp"

// claimsFor returns valid claims of iss's token for corral, with more
// claims over them (a nil value removes one).
func claimsFor(iss *testIssuer, more map[string]any) map[string]any {
	now := time.Now().Unix()
	c := map[string]any{"iss": iss.url, "aud": testResource, "sub": "user-1", "client_id": "agent", "exp": now + 300, "iat": now, "scope": "mcp:tools"}
	for k, v := range more {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// rsaToken returns a valid RS256 token of iss, signed with the test RSA
// key as kid "r1", with more claims.
func rsaToken(t testing.TB, iss *testIssuer, more map[string]any) string {
	return signJWT(t, map[string]any{"alg": algRS256, "kid": "r1", "typ": "at+jwt"}, claimsFor(iss, more), testKeys().rsa)
}

func TestTokenValidatorAcceptsEachAlgorithmOnlyWithItsKey(t *testing.T) {
	k := testKeys()
	iss := newTestIssuer(t, rsaJWK(k.rsa, "r1", ""), rsaJWK(k.rsa2, "p1", algPS256), ecJWK(k.ec, "e1"), edJWK(k.ed, "d1"))
	v := newTokenValidator(&OAuthConfig{Issuer: iss.url, Resource: testResource}, testLogger(t))
	for _, tc := range []struct {
		name   string
		header map[string]any
		key    any
		ok     bool
	}{
		{"RS256 with the RSA key", map[string]any{"alg": algRS256, "kid": "r1"}, k.rsa, true},
		{"PS256 with an RSA key that allows any RSA algorithm", map[string]any{"alg": algPS256, "kid": "r1"}, k.rsa, true},
		{"PS256 with the key whose alg is PS256", map[string]any{"alg": algPS256, "kid": "p1"}, k.rsa2, true},
		{"RS256 with a key whose alg is PS256", map[string]any{"alg": algRS256, "kid": "p1"}, k.rsa2, false},
		{"ES256 with the P-256 key", map[string]any{"alg": algES256, "kid": "e1"}, k.ec, true},
		{"EdDSA with the Ed25519 key", map[string]any{"alg": algEdDSA, "kid": "d1"}, k.ed, true},
		{"EdDSA without a kid", map[string]any{"alg": algEdDSA}, k.ed, true},
		{"ES256 naming the RSA key", map[string]any{"alg": algES256, "kid": "r1"}, k.ec, false},
		{"the Ed25519 key's kid with another Ed25519 key's signature", map[string]any{"alg": algEdDSA, "kid": "d1"}, ed25519.NewKeyFromSeed(make([]byte, 32)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.validate(t.Context(), signJWT(t, tc.header, claimsFor(iss, nil), tc.key))
			if (err == nil) != tc.ok {
				t.Errorf("validate = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// badTokens are the tokens of the "Bad input" list that a valid
// key set refuses, each made for iss.
func badTokens(t testing.TB, iss *testIssuer) []struct{ name, token string } {
	k := testKeys()
	rsaPub, _ := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	good := rsaToken(t, iss, nil)
	parts := strings.Split(good, ".")
	otherSig := strings.Split(signJWT(t, map[string]any{"alg": algRS256, "kid": "r1"}, claimsFor(iss, map[string]any{"sub": "other"}), k.rsa), ".")[2]
	now := time.Now().Unix()
	return []struct{ name, token string }{
		{"a wrong signature", parts[0] + "." + parts[1] + "." + otherSig},
		{"a signature by another key under the right kid", signJWT(t, map[string]any{"alg": algRS256, "kid": "r1"}, claimsFor(iss, nil), k.rsa2)},
		{"alg none", signJWT(t, map[string]any{"alg": "none", "kid": "r1"}, claimsFor(iss, nil), nil) + "AA"},
		{"alg none with no signature", signJWT(t, map[string]any{"alg": "none", "kid": "r1"}, claimsFor(iss, nil), nil)},
		{"HS256 keyed with the RSA public key (DER)", signJWT(t, map[string]any{"alg": "HS256", "kid": "r1"}, claimsFor(iss, nil), rsaPub)},
		{"HS256 keyed with the RSA key's n", signJWT(t, map[string]any{"alg": "HS256", "kid": "r1"}, claimsFor(iss, nil), k.rsa.N.Bytes())},
		{"an unknown kid", signJWT(t, map[string]any{"alg": algRS256, "kid": "nope"}, claimsFor(iss, nil), k.rsa)},
		{"an embedded jwk of the signer's own", signJWT(t, map[string]any{"alg": algRS256, "kid": "mine", "jwk": rsaJWK(k.rsa2, "mine", "")}, claimsFor(iss, nil), k.rsa2)},
		{"a jku pointing elsewhere", signJWT(t, map[string]any{"alg": algRS256, "kid": "mine", "jku": "http://127.0.0.1:1/jwks"}, claimsFor(iss, nil), k.rsa2)},
		{"a wrong iss", rsaToken(t, iss, map[string]any{"iss": iss.url + "/other"})},
		{"a wrong aud", rsaToken(t, iss, map[string]any{"aud": "http://127.0.0.1/other"})},
		{"an aud list without corral", rsaToken(t, iss, map[string]any{"aud": []string{"a", "b"}})},
		{"an aud of another path", rsaToken(t, iss, map[string]any{"aud": testResource + "/x"})},
		{"an aud of another port", rsaToken(t, iss, map[string]any{"aud": "http://127.0.0.1:8080/mcp"})},
		{"no aud", rsaToken(t, iss, map[string]any{"aud": nil})},
		{"no exp", rsaToken(t, iss, map[string]any{"exp": nil})},
		{"expired beyond the leeway", rsaToken(t, iss, map[string]any{"exp": now - 120})},
		{"not yet valid beyond the leeway", rsaToken(t, iss, map[string]any{"nbf": now + 120})},
		{"exp as a string", rsaToken(t, iss, map[string]any{"exp": "tomorrow"})},
		{"a crit header", signJWT(t, map[string]any{"alg": algRS256, "kid": "r1", "crit": []string{"exp"}}, claimsFor(iss, nil), k.rsa)},
		{"a 1 MB token", parts[0] + "." + b64(make([]byte, 1<<20)) + "." + parts[2]},
		{"a 40 KB token", parts[0] + "." + b64(make([]byte, 30<<10)) + "." + parts[2]},
		{"two parts", parts[0] + "." + parts[1]},
		{"padded base64", parts[0] + "=." + parts[1] + "." + parts[2]},
		{"an opaque token without introspection", "opaque-" + strings.Repeat("x", 40)},
	}
}

func TestTokenValidatorRefusesEveryBadToken(t *testing.T) {
	iss := newTestIssuer(t, rsaJWK(testKeys().rsa, "r1", ""))
	v := newTokenValidator(&OAuthConfig{Issuer: iss.url, Resource: testResource}, testLogger(t))
	if _, err := v.validate(t.Context(), rsaToken(t, iss, nil)); err != nil {
		t.Fatalf("a good token: validate = %v", err)
	}
	for _, tc := range badTokens(t, iss) {
		t.Run(tc.name, func(t *testing.T) {
			info, err := v.validate(t.Context(), tc.token)
			if err == nil {
				t.Fatalf("validate = %+v, nil; want an error", info)
			}
			if ae, ok := err.(*authError); !ok || ae.status != http.StatusUnauthorized || ae.code != "invalid_token" {
				t.Errorf("validate = %#v, want a 401 invalid_token", err)
			}
		})
	}
}

func TestTheLeewayAcceptsAClockSlightlyOff(t *testing.T) {
	iss := newTestIssuer(t, rsaJWK(testKeys().rsa, "r1", ""))
	v := newTokenValidator(&OAuthConfig{Issuer: iss.url, Resource: testResource, Leeway: Duration(time.Minute)}, testLogger(t))
	now := time.Now().Unix()
	for _, more := range []map[string]any{{"exp": now - 30}, {"nbf": now + 30}, {"aud": []string{"x", testResource}}, {"exp": float64(now) + 100.5},
		{"aud": "HTTP://127.0.0.1/mcp/"}} { // the spec's canonical URI: scheme and host in any case, a final slash or none

		if _, err := v.validate(t.Context(), rsaToken(t, iss, more)); err != nil {
			t.Errorf("validate(claims %v) = %v, want nil", more, err)
		}
	}
}

func TestTheKeySetIsFetchedOnAnUnknownKidAtMostOncePerIntervalAndKeptWhenTheIssuerFails(t *testing.T) {
	k := testKeys()
	iss := newTestIssuer(t, rsaJWK(k.rsa, "r1", ""))
	v := newTokenValidator(&OAuthConfig{Issuer: iss.url, Resource: testResource, JWKSRefreshInterval: Duration(time.Minute), FetchTimeout: Duration(200 * time.Millisecond)}, testLogger(t))
	now := time.Now()
	v.now = func() time.Time { return now }
	late := map[string]any{"exp": now.Add(100 * time.Hour).Unix()} // the test moves the clock on
	if _, err := v.validate(t.Context(), rsaToken(t, iss, late)); err != nil {
		t.Fatal(err)
	}
	// Tokens naming made-up keys, many of them: no fetch within the interval.
	for i := range 20 {
		if _, err := v.validate(t.Context(), signJWT(t, map[string]any{"alg": algRS256, "kid": fmt.Sprint("made-up-", i)}, claimsFor(iss, late), k.rsa)); err == nil {
			t.Fatal("a made-up kid was accepted")
		}
	}
	if n := iss.jwksHits.Load(); n != 1 {
		t.Errorf("the key set was fetched %d times, want once within jwksRefreshInterval", n)
	}
	// A rotation at the issuer: the new key is fetched once the interval
	// has passed.
	iss.setKeys(rsaJWK(k.rsa2, "r2", ""), rsaJWK(k.rsa, "r1", ""))
	rotated := signJWT(t, map[string]any{"alg": algRS256, "kid": "r2"}, claimsFor(iss, late), k.rsa2)
	now = now.Add(time.Minute)
	if _, err := v.validate(t.Context(), rotated); err != nil {
		t.Fatalf("a token of the rotated key after the interval: %v", err)
	}
	// The issuer fails in each way: the keys corral has are kept, and a
	// token of a key it does not have is refused.
	for _, mode := range []string{"huge", "slow", "invalid", "500"} {
		iss.setMode(mode)
		now = now.Add(2 * time.Hour) // past jwksMaxAge too
		hits := iss.jwksHits.Load()
		if _, err := v.validate(t.Context(), signJWT(t, map[string]any{"alg": algRS256, "kid": "r3-" + mode}, claimsFor(iss, late), k.rsa2)); err == nil {
			t.Errorf("%s key set: a token of an unknown key was accepted", mode)
		}
		if iss.jwksHits.Load() != hits+1 {
			t.Errorf("%s key set: fetched %d times, want once", mode, iss.jwksHits.Load()-hits)
		}
		if _, err := v.validate(t.Context(), signJWT(t, map[string]any{"alg": algRS256, "kid": "r2", "n": mode}, claimsFor(iss, late), k.rsa2)); err != nil {
			t.Errorf("%s key set: a token of a key corral had = %v, want it kept", mode, err)
		}
	}
}

func TestAFreshValidatorRefusesEveryTokenWhenTheKeySetIsBad(t *testing.T) {
	for _, mode := range []string{"huge", "slow", "invalid", "500"} {
		t.Run(mode, func(t *testing.T) {
			iss := newTestIssuer(t, rsaJWK(testKeys().rsa, "r1", ""))
			iss.setMode(mode)
			v := newTokenValidator(&OAuthConfig{Issuer: iss.url, Resource: testResource, FetchTimeout: Duration(200 * time.Millisecond)}, testLogger(t))
			start := time.Now()
			_, err := v.validate(t.Context(), rsaToken(t, iss, nil))
			if ae, ok := err.(*authError); !ok || ae.status != http.StatusUnauthorized {
				t.Errorf("validate = %v, want a 401", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("validate took %v, want it bounded by fetchTimeout", d)
			}
		})
	}
}

func TestOpaqueTokensAreIntrospectedAndTheAnswerCached(t *testing.T) {
	iss := newTestIssuer(t, rsaJWK(testKeys().rsa, "r1", ""))
	now := time.Now().Unix()
	iss.active["good-opaque-token"] = map[string]any{"active": true, "iss": iss.url, "aud": testResource, "sub": "svc", "client_id": "robot", "scope": "mcp:tools", "exp": now + 300}
	iss.active["other-aud"] = map[string]any{"active": true, "aud": "http://elsewhere", "exp": now + 300}
	cfg := &OAuthConfig{Issuer: iss.url, Resource: testResource, Introspection: &IntrospectionConfig{ClientID: "corral", secret: "s3cret", MaxCached: 2}}
	v := newTokenValidator(cfg, testLogger(t))
	for range 3 {
		info, err := v.validate(t.Context(), "good-opaque-token")
		if err != nil || info.clientID != "robot" || info.sub != "svc" {
			t.Fatalf("validate = %+v, %v; want client robot", info, err)
		}
	}
	if n := iss.introspectHits.Load(); n != 1 {
		t.Errorf("introspected %d times, want once (then cached)", n)
	}
	for _, bad := range []string{"unknown-token", "other-aud"} {
		if _, err := v.validate(t.Context(), bad); err == nil {
			t.Errorf("validate(%s) = nil, want refused", bad)
		}
	}
	for i := range 10 { // the cache stays within maxCached
		v.validate(t.Context(), fmt.Sprint("junk-", i))
	}
	if n := len(v.introspect.m); n > 2 {
		t.Errorf("the introspection cache holds %d answers, more than maxCached 2", n)
	}
}

// oauthGateway starts a gateway whose "oauth" accepts iss's tokens, with
// extra members of "oauth" and of the config, and a remote server (tr)
// that answers tools/call and records its requests' headers.
func oauthGateway(t *testing.T, iss *testIssuer, oauthMore, more string) (*testGateway, *testRemote) {
	t.Helper()
	tr := newTestRemote(t, &testRemote{call: func(w http.ResponseWriter, r *http.Request, msg *wireMsg) {
		w.Header().Set("Content-Type", "application/json")
		if msg.Method == "tools/list" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`, msg.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, msg.ID)
	}})
	tg := startGateway(t, `{
		"authTokenFile": `+tokenFile(t, rootToken)+`,
		"oauth": {"issuer": "`+iss.url+`", "resource": "`+testResource+`", "jwksRefreshInterval": "1ms", "fetchTimeout": "300ms"`+oauthMore+`},
		"mcpServers": {"r": {"url": "`+tr.url+`", "headers": {"Authorization": "Bearer server-own-token"}}}`+more+`
	}`)
	return tg, tr
}

func TestEveryBadTokenGets401WithTheChallengeAndNothingReachesAServer(t *testing.T) {
	t.Parallel()
	k := testKeys()
	iss := newTestIssuer(t, rsaJWK(k.rsa, "r1", ""))
	tg, tr := oauthGateway(t, iss, `, "scopes": ["mcp:tools"]`, "")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	good := rsaToken(t, iss, nil)
	c := connectWith(t, tg.url, "Bearer "+good)
	if resp, body := c.post(call); resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("a good token's call = %s %s", resp.Status, body)
	}
	calls := len(tr.recorded("tools/call"))

	bad := badTokens(t, iss)
	// The key set failing in each way, for a token of a key corral lacks.
	for _, mode := range []string{"huge", "slow", "invalid", "500"} {
		bad = append(bad, struct{ name, token string }{"a key set that is " + mode, signJWT(t, map[string]any{"alg": algRS256, "kid": "new-" + mode}, claimsFor(iss, nil), k.rsa2)})
	}
	bad = append(bad, struct{ name, token string }{"no token", ""})
	wantChallenge := `Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "a key set that is ") {
				iss.setMode(strings.TrimPrefix(tc.name, "a key set that is "))
				defer iss.setMode("")
			}
			auth := "Bearer " + tc.token
			if tc.token == "" {
				auth = ""
			}
			for _, body := range []string{
				`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				call,
			} {
				bc := &client{t: t, url: tg.url, auth: auth, sid: c.sid}
				resp, data := bc.post(body)
				if tc.name == "a 1 MB token" && resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
					return // past maxHeaderBytes: net/http refuses it before corral reads it
				}
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("POST = %s %s, want 401", resp.Status, data)
				}
				ch := resp.Header.Get("WWW-Authenticate")
				if !strings.HasPrefix(ch, wantChallenge) {
					t.Errorf("WWW-Authenticate = %q, want it to start %q", ch, wantChallenge)
				}
				if tc.token != "" && !strings.Contains(ch, `error="invalid_token"`) {
					t.Errorf("WWW-Authenticate = %q, want error=\"invalid_token\"", ch)
				}
			}
		})
	}
	if n := len(tr.recorded("tools/call")); n != calls {
		t.Errorf("the server got %d calls, want %d: a refused token's call reached it", n, calls)
	}
	// No token corral accepted was ever passed on: the server saw only the
	// Authorization its own config gives it.
	for method, hs := range map[string][]http.Header{"initialize": tr.recorded("initialize"), "tools/call": tr.recorded("tools/call")} {
		for _, h := range hs {
			if got := h.Get("Authorization"); got != "Bearer server-own-token" {
				t.Errorf("the server's %s carried Authorization %q, want its own config's", method, got)
			}
		}
	}
	// A token short of the scope: 403 insufficient_scope, naming it.
	resp, body := (&client{t: t, url: tg.url, auth: "Bearer " + rsaToken(t, iss, map[string]any{"scope": "other"})}).post(call)
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusForbidden || !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="mcp:tools"`) {
		t.Errorf("a token without the scope = %s %q %s, want 403 insufficient_scope with scope=\"mcp:tools\"", resp.Status, ch, body)
	}
	// The static token still works beside OAuth, and the pages about every
	// server keep to it: an OAuth caller, even one that sees every server,
	// gets 403.
	connectWith(t, tg.url, "Bearer "+rootToken)
	for _, path := range []string{"/metrics", "/healthz"} {
		for token, want := range map[string]int{good: http.StatusForbidden, rootToken: http.StatusOK} {
			req, _ := http.NewRequest("GET", strings.TrimSuffix(tg.url, mcpPath)+path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s with the token of %s = %s, want %d", path, map[bool]string{true: "authTokenFile", false: "OAuth"}[token == rootToken], resp.Status, want)
			}
		}
	}
}

func TestTheProtectedResourceMetadataIsServedAtEachPathForm(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t, rsaJWK(testKeys().rsa, "r1", ""))
	tg, _ := oauthGateway(t, iss, `, "scopes": ["mcp:tools"], "map": [{"scope": "mcp:admin", "client": "ops"}]`, `, "clients": {"ops": {}}`)
	base := strings.TrimSuffix(tg.url, mcpPath)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource/mcp/ops"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var doc struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(data, &doc) != nil {
			t.Fatalf("GET %s = %s %s", path, resp.Status, data)
		}
		if doc.Resource != testResource || len(doc.AuthorizationServers) != 1 || doc.AuthorizationServers[0] != iss.url ||
			strings.Join(doc.ScopesSupported, " ") != "mcp:tools mcp:admin" || strings.Join(doc.BearerMethods, " ") != "header" {
			t.Errorf("GET %s = %s", path, data)
		}
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/other", "/.well-known/oauth-protected-resource/mcp/a/b"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %s, want 404", path, resp.Status)
		}
	}
}

func TestATokensClaimsSelectTheClientAndItsProfile(t *testing.T) {
	t.Parallel()
	iss := newTestIssuer(t, rsaJWK(testKeys().rsa, "r1", ""))
	tg, _ := oauthGateway(t, iss, `, "map": [
			{"clientId": "ci-bot", "client": "ci"},
			{"group": "admins", "client": "admin"},
			{"sub": "alice", "scope": "mcp:tools", "client": "admin"}
		]`, `,
		"clients": {"ci": {"profile": "none"}, "admin": {}},
		"profiles": {"none": {"servers": {}}},
		"audit": {"file": "STATE/audit.jsonl"}`)
	for _, tc := range []struct {
		name   string
		claims map[string]any
		status int
		tools  int
	}{
		{"client_id ci-bot is client ci, whose profile shows nothing", map[string]any{"client_id": "ci-bot"}, 200, 0},
		{"azp as the client", map[string]any{"client_id": nil, "azp": "ci-bot"}, 200, 0},
		{"group admins is client admin", map[string]any{"groups": []string{"x", "admins"}}, 200, 1},
		{"sub alice with the scope is client admin", map[string]any{"sub": "alice"}, 200, 1},
		{"sub alice without the scope matches no rule", map[string]any{"sub": "alice", "scope": "other"}, 403, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &client{t: t, url: tg.url, auth: "Bearer " + rsaToken(t, iss, tc.claims)}
			resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			if resp.StatusCode != tc.status {
				t.Fatalf("initialize = %s %s, want %d", resp.Status, body, tc.status)
			}
			if tc.status != 200 {
				return
			}
			c.sid = resp.Header.Get("Mcp-Session-Id")
			if n := len(c.listToolNames()); n != tc.tools {
				t.Errorf("the client lists %d tools, want %d", n, tc.tools)
			}
		})
	}
	// Two callers mapped to one client do not share a session.
	a := connectWith(t, tg.url, "Bearer "+rsaToken(t, iss, map[string]any{"sub": "u1", "groups": "admins"}))
	// The audit trail names the client a token's claims select.
	if resp, body := a.post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{}}}`); resp.StatusCode != 200 {
		t.Fatalf("admin's call = %s %s", resp.Status, body)
	}
	found := false
	for _, l := range readAudit(t, filepath.Join(tg.dir, "audit.jsonl")) {
		found = found || l.Client == "admin" && l.Method == "tools/call" && l.Name == "echo" && l.Outcome == "ok"
	}
	if !found {
		t.Errorf("the audit trail has no ok tools/call line of echo by client admin: %s", mustRead(t, filepath.Join(tg.dir, "audit.jsonl")))
	}
	b := &client{t: t, url: tg.url, sid: a.sid, auth: "Bearer " + rsaToken(t, iss, map[string]any{"sub": "u2", "groups": "admins"})}
	if resp, _ := b.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another subject using the session = %s, want 404", resp.Status)
	}
}

func TestOAuthConfigErrorsNameTheFieldAndPlainHTTPBeyondLoopbackIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, config, want string
	}{
		{"no issuer", `"oauth": {"resource": "https://c.example/mcp"}`, "oauth.issuer: is missing"},
		{"an http issuer beyond loopback", `"oauth": {"issuer": "http://login.example", "resource": "https://c.example/mcp"}`, "oauth.issuer: \"http://login.example\" is plain http beyond loopback"},
		{"a misspelt field", `"oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp", "scope": ["x"]}`, `unknown field "scope"`},
		{"a rule naming no client", `"oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp", "map": [{"sub": "x", "client": "ghost"}]}`, `oauth.map[0].client: no client is named "ghost"`},
		{"a rule matching everything", `"oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp", "map": [{"client": "a"}]}, "clients": {"a": {}}`, "oauth.map[0]: matches every token"},
		{"a huge leeway", `"oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp", "leeway": "1h"}`, "oauth.leeway: is 1h0m0s, more than 5m0s"},
		{"plain HTTP beyond loopback", `"listen": "0.0.0.0:8080", "oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp"}`, "oauth.tlsTerminated: listen \"0.0.0.0:8080\" is beyond loopback"},
		{"a client with no token and no rule", `"oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp"}, "clients": {"a": {}}`, "clients.a.tokenFile: the client has no token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, `{`+tc.config+`, "mcpServers": {"s": {"command": "true"}}}`, t.TempDir())
			_, err := LoadConfig(path, func(string) (string, bool) { return "", false }, func(string) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadConfig = %v, want an error holding %q", err, tc.want)
			}
		})
	}
	path := writeConfig(t, `{"listen": "0.0.0.0:8080", "oauth": {"issuer": "https://l.example/realms/r", "resource": "https://c.example/mcp", "tlsTerminated": true,
		"scopes": ["mcp"], "map": [{"group": "g", "client": "a"}]}, "clients": {"a": {}}, "mcpServers": {"s": {"command": "true"}}}`, t.TempDir())
	cfg, err := LoadConfig(path, func(string) (string, bool) { return "", false }, func(string) {})
	if err != nil {
		t.Fatalf("LoadConfig with tlsTerminated = %v", err)
	}
	report := string(cfg.oauthReport())
	for _, want := range []string{
		"tokens of issuer https://l.example/realms/r (metadata from https://l.example/.well-known/oauth-authorization-server/realms/r, then https://l.example/.well-known/openid-configuration/realms/r, then https://l.example/realms/r/.well-known/openid-configuration)",
		"resource https://c.example/mcp, published at https://c.example/.well-known/oauth-protected-resource/mcp",
		`a token with groups "g" is client a`,
		"any other token gets 403",
		"TLS is terminated in front of corral",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("oauthReport =\n%s\nwant it to hold %q", report, want)
		}
	}
}

func TestOAuthOverPlainHTTPIsRefusedWhenListenIsTakenBeyondLoopback(t *testing.T) {
	t.Parallel()
	refused := startCorral(t, `{"oauth": {"issuer": "https://l.example", "resource": "https://c.example/mcp"},
		"mcpServers": {"a": {"command": "FAKE", "args": ["-state", "STATE"]}}}`, "-listen", "0.0.0.0:0")
	if code := refused.waitExit(20 * time.Second); code != 2 {
		t.Errorf("corral -listen 0.0.0.0:0 with oauth exited %d, want 2", code)
	}
	refused.mu.Lock()
	log := strings.Join(refused.log, "\n")
	refused.mu.Unlock()
	if !strings.Contains(log, "with OAuth over plain HTTP") || !strings.Contains(log, "oauth.tlsTerminated") || len(fakeProcesses(t, refused.dir)) != 0 {
		t.Errorf("refusal: log %q, %d servers started; want tlsTerminated named and nothing started", log, len(fakeProcesses(t, refused.dir)))
	}
}

func TestAKeySetOrEndpointOverPlainHTTPBeyondLoopbackIsNeverFetched(t *testing.T) {
	v := newTokenValidator(&OAuthConfig{Issuer: "https://l.example", Resource: testResource}, testLogger(t))
	for _, u := range []string{"http://keys.example/jwks", "ftp://127.0.0.1/jwks"} {
		if _, err := v.fetch(t.Context(), u, 1024); err == nil || !strings.Contains(err.Error(), "refusing to fetch") {
			t.Errorf("fetch(%s) = %v, want it refused unsent", u, err)
		}
	}
	// A loopback issuer whose key set redirects to plain http elsewhere.
	ts := httptest.NewServer(http.RedirectHandler("http://keys.example/jwks", http.StatusFound))
	defer ts.Close()
	if _, err := v.fetch(t.Context(), ts.URL, 1024); err == nil || !strings.Contains(err.Error(), "refusing a redirect") {
		t.Errorf("fetch of a redirect to plain http = %v, want it refused", err)
	}
}
