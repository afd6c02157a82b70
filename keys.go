package locks

import (
	"encoding"
	"errors"
	"reflect"
	"strconv"
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
	case encoding.TextMarshaler:
		return marshaledKeyText(k)
	default:
		return reflectKeyText(key)
	}
	return s, checkText(s)
}

// marshaledKeyText returns the text of a key whose type implements
// encoding.TextMarshaler (a uuid.UUID, a netip.Addr), or what is wrong
// with it.
func marshaledKeyText(k encoding.TextMarshaler) (string, string) {
	if v := reflect.ValueOf(k); v.Kind() == reflect.Pointer && v.IsNil() {
		return "", "the key is a nil " + v.Type().String()
	}
	b, err := k.MarshalText()
	if err != nil {
		return "", "the key's MarshalText failed (" + reflect.TypeOf(k).String() + "): " + err.Error()
	}
	s := string(b)
	return s, checkText(s)
}

// reflectKeyText handles the kinds keyText's switch does not name: smaller
// integers, and named types whose underlying type is a string, an integer
// or a []byte (type InvoiceID string).
func reflectKeyText(key any) (string, string) {
	v := reflect.ValueOf(key)
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		return s, checkText(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(v.Uint(), 10), ""
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			s := string(v.Bytes())
			return s, checkText(s)
		}
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(b), v)
			s := string(b)
			return s, checkText(s)
		}
	}
	return "", "a key is a string, an integer, a []byte, a [N]byte or an encoding.TextMarshaler, not a " + v.Type().String()
}

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

// validName reports whether name is 1 to MaxNameLen characters of
// A-Z a-z 0-9 _ - . : /.
func validName(name string) bool { return checkName(name) == "" }

// checkName returns what is wrong with a lock name, or "".
func checkName(name string) string {
	if len(name) == 0 {
		return "the name is empty"
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
