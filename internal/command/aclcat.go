package command

// ACLCategories gives Redis's ACL categories, in Redis's order: derived from
// the flags and group, except where Redis's own choice does not follow from
// them.
func ACLCategories(spec *Spec) []string {
	switch spec.Name {
	case "client", "config", "config|help", "object", "slowlog", "slowlog|help", "latency", "latency|help":
		return []string{"@slow"}
	case "client|setname", "client|getname", "client|id", "wait":
		return []string{"@slow", "@connection"}
	case "command", "command|count", "command|info", "command|docs", "command|list",
		"command|getkeys", "command|getkeysandflags", "command|help":
		return []string{"@slow", "@connection"}
	case "readonly", "readwrite", "asking":
		return []string{"@fast", "@connection"}
	case "dbsize":
		return []string{"@keyspace", "@read", "@fast"}
	case "flushall", "flushdb":
		return []string{"@keyspace", "@write", "@slow", "@dangerous"}
	case "info":
		return []string{"@slow", "@dangerous"}
	case "keys":
		return []string{"@keyspace", "@read", "@slow", "@dangerous"}
	case "object|help":
		return []string{"@keyspace", "@slow"}
	case "memory|help":
		return []string{"@slow"}
	case "acl|setuser", "acl|deluser", "acl|load":
		// Write routes them through the log; Redis files them under admin only.
		return []string{"@admin", "@slow", "@dangerous"}
	case "restore":
		return []string{"@keyspace", "@write", "@slow", "@dangerous"}
	case "sort":
		return []string{"@write", "@set", "@sortedset", "@list", "@slow", "@dangerous"}
	case "sort_ro":
		return []string{"@read", "@set", "@sortedset", "@list", "@slow", "@dangerous"}
	case "script":
		return []string{"@slow"}
	}
	if spec.Group == "scripting" {
		// Scripts are neither reads nor writes to ACLs: what they touch is
		// checked per redis.call.
		return []string{"@slow", "@scripting"}
	}
	has := func(f Flags) bool { return spec.Has(f) }
	group := spec.Group
	var out []string
	add := func(ok bool, cat string) {
		if ok {
			out = append(out, cat)
		}
	}
	add(group == "generic", "@keyspace")
	add(has(ReadOnly), "@read")
	add(has(Write), "@write")
	add(group == "set", "@set")
	add(group == "string", "@string")
	add(group == "pubsub", "@pubsub")
	add(has(Admin), "@admin")
	add(has(Fast), "@fast")
	add(!has(Fast), "@slow")
	add(has(Admin), "@dangerous")
	add(group == "connection", "@connection")
	add(group == "transactions", "@transaction")
	return out
}
