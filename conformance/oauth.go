package conformance

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A case about the MCP authorization specification (2025-11-25): a
// gateway that is an OAuth 2.1 resource server (setting "oauth": it
// accepts the access tokens of an issuer, for its own URL as resource)
// answers a request without a token 401 with a WWW-Authenticate Bearer
// challenge naming its Protected Resource Metadata (RFC 9728), serves that
// metadata naming itself and the issuer, accepts the issuer's token, and
// refuses a token issued for another resource. The issuer is the suite's
// own: metadata (RFC 8414) and a key set of one RSA key.

// testIssuer serves an issuer's metadata and key set, and signs tokens.
type testIssuer struct {
	url string
	key *rsa.PrivateKey
}

func newTestIssuer(t *testing.T) *testIssuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &testIssuer{key: key}
	b64 := base64.RawURLEncoding.EncodeToString
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]string{"issuer": iss.url, "jwks_uri": iss.url + "/jwks"})
		case "/jwks":
			json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
				"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	iss.url = ts.URL
	return iss
}

// token returns an RS256 access token of the issuer for aud.
func (iss *testIssuer) token(t *testing.T, aud string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "at+jwt"})
	now := time.Now().Unix()
	c, _ := json.Marshal(map[string]any{"iss": iss.url, "aud": aud, "sub": "conformance", "client_id": "conformance", "iat": now, "exp": now + 600})
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(nil, iss.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

func TestOAuthChallengeNamesTheResourceMetadataAndTheIssuersTokenIsAccepted(t *testing.T) {
	guarantee(t)
	if adapter.Transport != "http" {
		skip(t, "the case speaks HTTP; the gateway's transport is %s", adapter.Transport)
	}
	iss := newTestIssuer(t)
	g := launchGateway(t, servers("one"), options{oauthIssuer: iss.url})
	resource := g.url
	g.token = iss.token(t, resource)
	g.waitReady([]string{"one"})

	post := func(auth string) *http.Response {
		req, _ := http.NewRequest("POST", g.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"conformance","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fatal(t, "POST %s: %v", g.url, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	resp := post("")
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != http.StatusUnauthorized {
		fatal(t, "a request without a token got %s, want 401", resp.Status)
	}
	m := regexp.MustCompile(`(?i)^Bearer\b.*\bresource_metadata="([^"]+)"`).FindStringSubmatch(challenge)
	if m == nil {
		fatal(t, "the 401's WWW-Authenticate is %q; want a Bearer challenge with resource_metadata (RFC 9728, section 5.1)", challenge)
	}
	mr, err := http.Get(m[1])
	if err != nil {
		fatal(t, "GET %s: %v", m[1], err)
	}
	defer mr.Body.Close()
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(mr.Body).Decode(&meta); err != nil || mr.StatusCode != 200 {
		fatal(t, "GET %s = %s, %v; want 200 and the resource metadata as JSON", m[1], mr.Status, err)
	}
	if meta.Resource != resource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != iss.url {
		fail(t, "the resource metadata names resource %q and authorization servers %q; want %q and [%q]", meta.Resource, meta.AuthorizationServers, resource, iss.url)
	}
	if resp := post("Bearer " + g.token); resp.StatusCode != http.StatusOK {
		fail(t, "the issuer's token for the gateway's resource got %s, want 200", resp.Status)
	}
	if resp := post("Bearer " + iss.token(t, "https://another.example/mcp")); resp.StatusCode != http.StatusUnauthorized {
		fail(t, "a token issued for another resource got %s, want 401", resp.Status)
	}
}
