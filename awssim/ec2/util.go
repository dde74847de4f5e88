package ec2

import "strconv"

func boolString(b bool) string { return strconv.FormatBool(b) }

func itoa(i int) string { return strconv.Itoa(i) }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
