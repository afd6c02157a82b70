package locks

import (
	"encoding"
	"errors"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/holdline/locks/shard"
)

// keyText returns the text form of key, the key's identity, or what is
// wrong with it in words. Text keys are returned as they are (no copy, no
// allocation); integers are formatted in decimal; a []byte or [N]byte is
// copied; an encoding.TextMarshaler's text is what MarshalText returns.
func keyText(key any) (string, string) {
	var s string
	switch k := key.(type) {
	case string:
		s = k
	case int:
		return strconv.Itoa(k), ""
	case int64:
		return strconv.FormatInt(k, 10), ""
	case int32:
		return strconv.FormatInt(int64(k), 10), ""
	case uint64:
		return strconv.FormatUint(k, 10), ""
	case uint32:
		return strconv.FormatUint(uint64(k), 10), ""
	case []byte:
		s = string(k)
	case nil:
		return "", "the key is nil"
	default:
		return reflectKeyText(key)
	}
	return s, checkText(s)
}

// marshaledKeyText returns the text of a key whose type t implements
// encoding.TextMarshaler (a uuid.UUID, a netip.Addr), or what is wrong
// with it.
//
// MarshalText is called on a copy of the key made here, never on the
// caller's value: a method call through the caller's interface would make
// every key escape to the heap, and so cost every hold of a string key an
// allocation. The copy is a typed one (reflect.Copy of a one-element
// array, with the garbage collector's write barriers), read from the
// interface's data word: the value it points at, or for a pointer-shaped
// type the word itself. A key that is a pointer (a *big.Int) is called
// through that copied pointer, at the value it points to, as the
// caller's own call would be.
func marshaledKeyText(key any, t reflect.Type) (string, string) {
	at := reflect.ArrayOf(1, t)
	cp := reflect.New(at).Elem()
	data := (*[2]unsafe.Pointer)(unsafe.Pointer(&key))[1]
	if directIface(t) {
		if data == nil && t.Kind() == reflect.Pointer {
			return "", "the key is a nil " + t.String()
		}
		reflect.Copy(cp, reflect.NewAt(at, unsafe.Pointer(&data)).Elem())
	} else {
		reflect.Copy(cp, reflect.NewAt(at, data).Elem())
	}
	var k encoding.TextMarshaler
	if t.Kind() == reflect.Pointer {
		k = cp.Index(0).Interface().(encoding.TextMarshaler) // a *big.Int: the copied pointer itself
	} else {
		k = cp.Index(0).Addr().Interface().(encoding.TextMarshaler) // a *T has T's methods
	}
	b, err := k.MarshalText()
	if err != nil {
		return "", "the key's MarshalText failed (" + t.String() + "): " + err.Error()
	}
	s := string(b)
	return s, checkTypedText(s, t)
}

// directIface reports whether an interface holds a value of t in its data
// word itself rather than a pointer to it: pointer-shaped types, and
// arrays and structs of one such element (the compiler's rule).
func directIface(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() == 1 && directIface(t.Elem())
	case reflect.Struct:
		return t.NumField() == 1 && directIface(t.Field(0).Type)
	}
	return false
}

var (
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	// byteType is the element of a []byte or [N]byte key: a slice or array
	// of a named byte type (type B uint8) is another underlying type.
	byteType = reflect.TypeFor[byte]()
)

// reflectKeyText handles the kinds keyText's switch does not name: smaller
// integers, and named types whose underlying type is a string, an integer
// or a []byte (type InvoiceID string).
func reflectKeyText(key any) (string, string) {
	v := reflect.ValueOf(key)
	if t := v.Type(); t.Implements(textMarshaler) {
		return marshaledKeyText(key, t)
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		return s, checkTypedText(s, v.Type())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(v.Uint(), 10), ""
	case reflect.Slice:
		if v.Type().Elem() == byteType {
			s := string(v.Bytes())
			return s, checkTypedText(s, v.Type())
		}
	case reflect.Array:
		if v.Type().Elem() == byteType {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			s := string(b)
			return s, checkTypedText(s, v.Type())
		}
	}
	return "", "a key is a string, an integer, a []byte, a [N]byte or an encoding.TextMarshaler, not a " + v.Type().String()
}

// A key's entry names keys of at most shard.MaxKeyLen bytes: this fails
// to compile if MaxKeyLen allows longer ones.
var _ [shard.MaxKeyLen - MaxKeyLen]struct{}

// checkText returns what is wrong with a text key, or "".
func checkText(s string) string {
	switch {
	case len(s) == 0:
		return "the key is empty"
	case len(s) > MaxKeyLen:
		return "the key is " + strconv.Itoa(len(s)) + " bytes long, more than " + strconv.Itoa(MaxKeyLen)
	}
	return ""
}

// checkTypedText is checkText for the text of a key of type t other than
// string and []byte: what is wrong names the type, so that a bad
// InvoiceID("") is told from a bad key of another type.
func checkTypedText(s string, t reflect.Type) string {
	if why := checkText(s); why != "" {
		return why + " (" + t.String() + ")"
	}
	return ""
}

// validName reports whether name is 1 to MaxNameLen characters of
// A-Z a-z 0-9 _ - . : /.
func validName(name string) bool { return checkName(name) == "" }

// checkName returns what is wrong with a lock name, or "".
func checkName(name string) string {
	if len(name) == 0 {
		return "the lock's name is empty" // no name to quote: the error has no "lock ...:" to say whose
	}
	if len(name) > MaxNameLen {
		return "the name is " + strconv.Itoa(len(name)) + " bytes long, more than " + strconv.Itoa(MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '-', c == '.', c == ':', c == '/':
		default:
			return "a name is made of A-Z a-z 0-9 _ - . : /, not " + strconv.Quote(name[i:i+1]) + " (byte " + strconv.Itoa(i) + ")"
		}
	}
	return ""
}

// KeyText returns the text form of key, its identity (see Lock.Hold for
// what a key is), or an error saying in words what is wrong with it. It
// is for a Locker of another package, such as a client of a store in
// another process, that must name keys exactly as a *Lock does; the
// error's text is the reason of the Invalid *Error a *Lock would return.
// Text keys are returned without a copy. Safe for concurrent use.
func KeyText(key any) (string, error) {
	text, why := keyText(key)
	if why != "" {
		return "", errors.New(why)
	}
	return text, nil
}
