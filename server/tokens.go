package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinTokenLen is the shortest token a tokens file may hold, in bytes: a
// bearer token is a password, and a short one is guessed.
const MinTokenLen = 16

// Tokens are the bearer tokens a server lets in, each optionally limited
// to lock names with one of its prefixes. Make them with ParseTokens or
// LoadTokens. Safe for concurrent use; never changed once made.
type Tokens struct {
	list []*token
}

// token is one line of a tokens file. Its identity (the pointer) is the
// principal that owns the sessions opened with it.
type token struct {
	sum      [sha256.Size]byte
	prefixes []string // nil: every lock name
	line     int      // for logs: the token itself is never logged
}

// LoadTokens reads a tokens file; see ParseTokens for its format.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads tokens, one a line: the token, then optionally
// whitespace and a comma-separated list of lock-name prefixes the token
// is limited to ("s3cr3t-token-of-billing invoices/,payments/"). Blank
// lines and lines starting with # are skipped. A token is at least
// MinTokenLen bytes with no whitespace; a token given twice, an empty
// prefix or a file without a token is an error.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
	seen := make(map[[sha256.Size]byte]int)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if n == 1 {
			text = strings.TrimPrefix(text, "\ufeff") // a byte-order mark some editors write
		}
		line := strings.TrimSpace(text)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 2 {
			return nil, fmt.Errorf("line %d: want a token and at most one list of prefixes, got %d fields", n, len(fields))
		}
		if len(fields[0]) < MinTokenLen {
			return nil, fmt.Errorf("line %d: the token is %d bytes long, fewer than %d", n, len(fields[0]), MinTokenLen)
		}
		tk := &token{sum: sha256.Sum256([]byte(fields[0])), line: n}
		if first, dup := seen[tk.sum]; dup {
			return nil, fmt.Errorf("line %d: the token of line %d again", n, first)
		}
		seen[tk.sum] = n
		if len(fields) == 2 {
			for p := range strings.SplitSeq(fields[1], ",") {
				if p == "" {
					return nil, fmt.Errorf("line %d: an empty prefix", n)
				}
				tk.prefixes = append(tk.prefixes, p)
			}
		}
		t.list = append(t.list, tk)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t.list) == 0 {
		return nil, fmt.Errorf("no token")
	}
	return t, nil
}

// Len returns the number of tokens.
func (t *Tokens) Len() int { return len(t.list) }

// lookup returns the token that matches s, or nil. It compares the
// SHA-256 of s with every token's in constant time, and compares with all
// of them whatever matched, so that neither the time taken nor which
// comparison stops tells anything of a token.
func (t *Tokens) lookup(s string) *token {
	sum := sha256.Sum256([]byte(s))
	var found *token
	for _, tk := range t.list {
		if subtle.ConstantTimeCompare(sum[:], tk.sum[:]) == 1 {
			found = tk
		}
	}
	return found
}

// allows reports whether the token may hold keys of lock name.
func (tk *token) allows(name string) bool {
	if tk == nil || tk.prefixes == nil {
		return true
	}
	for _, p := range tk.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// bearer returns the token of an authorization header's value
// "Bearer TOKEN", or "" for anything else.
func bearer(v string) string {
	const scheme = "bearer "
	if len(v) <= len(scheme) || !bytes.EqualFold([]byte(v[:len(scheme)]), []byte(scheme)) {
		return ""
	}
	return strings.TrimSpace(v[len(scheme):])
}
