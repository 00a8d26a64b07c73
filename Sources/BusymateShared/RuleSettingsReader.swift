/// Reading `rules`, `breakpoints` and `upstream_proxy`: strict, since a
/// misspelt key in a rule would otherwise do nothing, silently.
extension AppSettings.Reader {
    /// Each action's own keys, besides `ruleCommonKeys` (docs/settings.md lists both; a test checks).
    static let ruleCommonKeys: Set<String> = ["name", "enabled", "match", "action"]
    static let ruleKeys: [String: Set<String>] = [
        "block": ["status"], "drop": [], "map_local": ["file", "directory"], "map_remote": ["to"],
        "host_override": ["address"], "headers": ["request", "response"],
    ]

    func rules(_ node: JSONNode) throws(SettingsError) -> [Rule] {
        guard case let .array(elements) = node.value else {
            throw SettingsError(
                message: "expected an array of rules, found \(node.value.typeName)", position: node.position, keyPath: "rules")
        }
        var out: [Rule] = []
        // A set, not a search of what came before: 20,000 rules took minutes.
        var names = Set<String>()
        for (i, element) in elements.enumerated() {
            let rule = try self.rule(element, path: "rules[\(i)]")
            guard names.insert(rule.name).inserted else {
                throw SettingsError(
                    message: "another rule is named \"\(rule.name)\"", position: element["name"]?.position ?? element.position,
                    keyPath: "rules[\(i)].name")
            }
            out.append(rule)
        }
        return out
    }

    private func rule(_ node: JSONNode, path: String) throws(SettingsError) -> Rule {
        guard case let .object(members) = node.value else {
            throw SettingsError(
                message: "expected a rule (an object), found \(node.value.typeName)", position: node.position, keyPath: path)
        }
        guard let actionNode = node["action"] else {
            throw SettingsError(
                message: "a rule needs \"action\": one of \(Rule.actionNames.joined(separator: ", "))", position: node.position,
                keyPath: path)
        }
        let actionName = try string(actionNode, path: "\(path).action")
        guard let extra = Self.ruleKeys[actionName] else {
            throw SettingsError(
                message: "\"\(actionName)\" is not an action; use one of \(Rule.actionNames.joined(separator: ", "))",
                position: actionNode.position, keyPath: "\(path).action")
        }
        let allowed = Self.ruleCommonKeys.union(extra)
        if let unknown = members.first(where: { !allowed.contains($0.key) }) {
            var error = SettingsError(
                message: "\"\(unknown.key)\" is not a key of a \(actionName) rule (it takes \(allowed.sorted().joined(separator: ", ")))",
                position: unknown.node.position, keyPath: "\(path).\(unknown.key)")
            error.unknownKey = unknown.key
            throw error
        }
        guard let nameNode = node["name"] else {
            throw SettingsError(message: "a rule needs a \"name\"", position: node.position, keyPath: path)
        }
        let name = try string(nameNode, path: "\(path).name")
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw SettingsError(message: "a rule's name cannot be empty", position: nameNode.position, keyPath: "\(path).name")
        }
        var enabled = true
        if let enabledNode = node["enabled"] {
            guard case let .bool(flag) = enabledNode.value else {
                throw SettingsError(
                    message: "expected true or false, found \(enabledNode.value.typeName)", position: enabledNode.position,
                    keyPath: "\(path).enabled")
            }
            enabled = flag
        }
        guard let matchNode = node["match"] else {
            throw SettingsError(
                message: "a rule needs \"match\": a URL pattern, or a filter (~d api & ~m POST)", position: node.position, keyPath: path)
        }
        let text = try string(matchNode, path: "\(path).match")
        let action = try action(actionName, node, path: path)
        switch RuleMatch.parse(text, for: action.kind) {
        case let .success(match):
            return Rule(name: name, enabled: enabled, match: match, action: action)
        case let .failure(why):
            let at = why.position.map { "position \($0): " } ?? ""
            throw SettingsError(message: "\"\(text)\": \(at)\(why.message)", position: matchNode.position, keyPath: "\(path).match")
        }
    }

    private func action(_ name: String, _ node: JSONNode, path: String) throws(SettingsError) -> Rule.Action {
        switch name {
        case "block":
            guard let statusNode = node["status"] else { return .block(status: 403) }
            let status = try number(statusNode, path: "\(path).status")
            guard (400...599).contains(status), status == status.rounded() else {
                throw SettingsError(
                    message: "must be an error status from 400 to 599", position: statusNode.position, keyPath: "\(path).status")
            }
            return .block(status: Int(status))
        case "drop":
            return .drop
        case "map_local":
            let file = try node["file"].map { n throws(SettingsError) in try absolutePath(n, path: "\(path).file") }
            let directory = try node["directory"].map { n throws(SettingsError) in try absolutePath(n, path: "\(path).directory") }
            guard (file == nil) != (directory == nil) else {
                throw SettingsError(
                    message: "a map_local rule takes either \"file\" or \"directory\"", position: node.position, keyPath: path)
            }
            return .mapLocal(file: file, directory: directory)
        case "map_remote":
            guard let toNode = node["to"] else {
                throw SettingsError(
                    message: "a map_remote rule needs \"to\": an http:// or https:// URL", position: node.position, keyPath: path)
            }
            let to = try string(toNode, path: "\(path).to")
            let lowered = to.lowercased()
            guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://"), URLPattern(to) != nil, !to.contains("*") else {
                throw SettingsError(
                    message: "\"\(to)\" is not an http:// or https:// URL", position: toNode.position, keyPath: "\(path).to")
            }
            return .mapRemote(to: to)
        case "host_override":
            guard let addressNode = node["address"] else {
                throw SettingsError(
                    message: "a host_override rule needs \"address\": an IP address", position: node.position, keyPath: path)
            }
            let address = try string(addressNode, path: "\(path).address")
            guard IPAddressText.isLiteral(address) else {
                throw SettingsError(
                    message: "\"\(address)\" is not an IP address", position: addressNode.position, keyPath: "\(path).address")
            }
            return .hostOverride(address: address)
        default:
            let request =
                try node["request"].map { n throws(SettingsError) in try headerEdits(n, path: "\(path).request") } ?? Rule.HeaderEdits()
            let response =
                try node["response"].map { n throws(SettingsError) in try headerEdits(n, path: "\(path).response") } ?? Rule.HeaderEdits()
            guard !request.isEmpty || !response.isEmpty else {
                throw SettingsError(
                    message: "a headers rule needs \"request\" or \"response\" edits", position: node.position, keyPath: path)
            }
            return .headers(request: request, response: response)
        }
    }

    /// `{"remove": ["Name"], "set": {"Name": "value"}, "add": {"Name": "value"}}`.
    private func headerEdits(_ node: JSONNode, path: String) throws(SettingsError) -> Rule.HeaderEdits {
        guard case let .object(members) = node.value else {
            throw SettingsError(
                message: "expected an object with \"remove\", \"set\" or \"add\", found \(node.value.typeName)", position: node.position,
                keyPath: path)
        }
        var edits = Rule.HeaderEdits()
        for member in members {
            let key = "\(path).\(member.key)"
            switch member.key {
            case "remove":
                for (i, item) in try strings(member.node, path: key).enumerated() {
                    try headerName(item.text, at: item.position, path: "\(key)[\(i)]")
                    edits.remove.append(item.text)
                }
            case "set", "add":
                guard case let .object(pairs) = member.node.value else {
                    throw SettingsError(
                        message: "expected an object of header names and values, found \(member.node.value.typeName)",
                        position: member.node.position, keyPath: key)
                }
                for pair in pairs {
                    try headerName(pair.key, at: pair.node.position, path: "\(key).\(pair.key)")
                    let value = try string(pair.node, path: "\(key).\(pair.key)")
                    // Scalars, not Characters: "\r\n" is one Character, equal to neither.
                    guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                        throw SettingsError(
                            message: "a header value cannot hold a line break", position: pair.node.position, keyPath: "\(key).\(pair.key)")
                    }
                    if member.key == "set" { edits.set.append((pair.key, value)) } else { edits.add.append((pair.key, value)) }
                }
            default:
                throw SettingsError(
                    message: "\"\(member.key)\" is not a header edit; use remove, set or add", position: member.node.position, keyPath: key)
            }
        }
        return edits
    }

    /// RFC 9110 token characters only.
    private func headerName(_ name: String, at position: SourcePosition, path: String) throws(SettingsError) {
        let token = name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
        guard !name.isEmpty, token else {
            throw SettingsError(message: "\"\(name)\" is not a header name", position: position, keyPath: path)
        }
        // Framing is the proxy's business: an edit there would cut messages short.
        if ["content-length", "transfer-encoding"].contains(name.lowercased()) {
            throw SettingsError(message: "\(name) frames the message; a rule cannot edit it", position: position, keyPath: path)
        }
    }

    private func absolutePath(_ node: JSONNode, path: String) throws(SettingsError) -> String {
        let text = try string(node, path: path)
        guard text.hasPrefix("/") else {
            throw SettingsError(message: "\"\(text)\" must be an absolute path", position: node.position, keyPath: path)
        }
        return text
    }

    mutating func breakpoints(_ node: JSONNode) throws(SettingsError) -> BreakpointSettings {
        try object(node, path: "breakpoints")
        var settings = BreakpointSettings()
        for (key, keyPath) in [
            ("request", "breakpoints.request"), ("response", "breakpoints.response"),
            ("messages_from_client", "breakpoints.messages_from_client"), ("messages_from_server", "breakpoints.messages_from_server"),
        ] {
            guard let list = node[key] else { continue }
            var patterns: [RuleMatch] = []
            for (i, item) in try strings(list, path: keyPath).enumerated() {
                switch RuleMatch.parse(breakpoint: item.text, response: key == "response") {
                case let .success(match) where match.isFilter && key.hasPrefix("messages"):
                    throw SettingsError(
                        message: "\"\(item.text)\": messages are held by their socket's URL: give a URL pattern, not a filter",
                        position: item.position, keyPath: "\(keyPath)[\(i)]")
                case let .success(match):
                    patterns.append(match)
                case let .failure(why):
                    let at = why.position.map { "position \($0): " } ?? ""
                    throw SettingsError(
                        message: "\"\(item.text)\": \(at)\(why.message)", position: item.position, keyPath: "\(keyPath)[\(i)]")
                }
            }
            switch key {
            case "request": settings.request = patterns
            case "response": settings.response = patterns
            case "messages_from_client": settings.messagesFromClient = patterns
            default: settings.messagesFromServer = patterns
            }
        }
        if let timeout = node["timeout_seconds"] {
            // 0 or "never": held until resolved.
            if case .string("never") = timeout.value {
                settings.timeoutSeconds = 0
            } else {
                guard case let .number(text) = timeout.value, let value = Double(text), value == 0 || (1...3600).contains(value) else {
                    throw SettingsError(
                        message: "must be a number of seconds from 1 to 3600, or 0 or \"never\" to hold until resolved",
                        position: timeout.position, keyPath: "breakpoints.timeout_seconds")
                }
                settings.timeoutSeconds = value
            }
        }
        return settings
    }

    mutating func upstreamProxy(_ node: JSONNode) throws(SettingsError) -> UpstreamProxySetting {
        try object(node, path: "upstream_proxy")
        guard let hostNode = node["host"] else {
            throw SettingsError(message: "needs \"host\"", position: node.position, keyPath: "upstream_proxy")
        }
        let host = try string(hostNode, path: "upstream_proxy.host")
        guard !host.isEmpty, SSLProxyMatcher.problem(with: host) == nil, !host.contains("*"), !host.contains("?") else {
            throw SettingsError(
                message: "\"\(host)\" is not a host name or IP address", position: hostNode.position, keyPath: "upstream_proxy.host")
        }
        guard let portNode = node["port"] else {
            throw SettingsError(message: "needs \"port\"", position: node.position, keyPath: "upstream_proxy")
        }
        let port = try number(portNode, path: "upstream_proxy.port")
        guard (1...65535).contains(port), port == port.rounded() else {
            throw SettingsError(message: "must be a port from 1 to 65535", position: portNode.position, keyPath: "upstream_proxy.port")
        }
        var scheme = UpstreamProxySetting.Scheme.http
        if let schemeNode = node["scheme"] {
            let text = try string(schemeNode, path: "upstream_proxy.scheme")
            guard let known = UpstreamProxySetting.Scheme(rawValue: text) else {
                throw SettingsError(
                    message: "\"\(text)\" is not a proxy scheme: \"http\" or \"socks5\"", position: schemeNode.position,
                    keyPath: "upstream_proxy.scheme")
            }
            scheme = known
        }
        let username = try node["username"].map { n throws(SettingsError) in try string(n, path: "upstream_proxy.username") }
        let password = try node["password"].map { n throws(SettingsError) in try string(n, path: "upstream_proxy.password") }
        if (username == nil) != (password == nil) {
            throw SettingsError(
                message: "basic auth takes both \"username\" and \"password\"", position: node.position, keyPath: "upstream_proxy")
        }
        // RFC 1929: each 1 to 255 bytes.
        for (key, value) in [("username", username), ("password", password)] where scheme == .socks5 {
            if let value, !(1...255).contains(value.utf8.count) {
                throw SettingsError(
                    message: "a SOCKS5 \(key) is 1 to 255 bytes", position: node[key]?.position, keyPath: "upstream_proxy.\(key)")
            }
        }
        if scheme == .http, let username, username.contains(":") {
            throw SettingsError(
                message: "a basic-auth user name cannot hold \":\"", position: node["username"]?.position,
                keyPath: "upstream_proxy.username")
        }
        let bypass = try node["bypass"].map { n throws(SettingsError) in try patterns(n, path: "upstream_proxy.bypass") } ?? []
        return UpstreamProxySetting(scheme: scheme, host: host, port: Int(port), username: username, password: password, bypass: bypass)
    }
}
