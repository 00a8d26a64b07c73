import Foundation

/// What stdout is: its width when it is a terminal, and whether to colour
/// (a terminal, and `NO_COLOR` unset: https://no-color.org).
struct Terminal {
    var width: Int?
    var colour: Bool

    static var standardOutput: Terminal {
        guard isatty(STDOUT_FILENO) == 1 else { return Terminal(width: nil, colour: false) }
        var size = winsize()
        let columns = ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
        let noColour = ProcessInfo.processInfo.environment["NO_COLOR"].map { !$0.isEmpty } ?? false
        return Terminal(width: columns, colour: !noColour && ProcessInfo.processInfo.environment["TERM"] != "dumb")
    }

    enum Colour: String {
        case red = "31", green = "32", yellow = "33", cyan = "36", dim = "2", bold = "1"
    }

    /// Text from the wire made safe to print: control characters (ESC, C1,
    /// and any other but tab and newline) shown as `\xNN`, so a URL, a
    /// header or a body cannot drive the operator's terminal.
    static func visible(_ text: String, keepNewlines: Bool = true) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0, keepNewlines) }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar, keepNewlines) {
                out += "\\x" + String(scalar.value, radix: 16).leftPadded(2)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar, _ keepNewlines: Bool) -> Bool {
        let v = scalar.value
        if keepNewlines && (v == 0x0A || v == 0x09) { return false }
        return v < 0x20 || (v >= 0x7F && v < 0xA0)
    }

    func paint(_ text: String, _ colour: Colour?) -> String {
        guard self.colour, let colour else { return text }
        return "\u{1B}[\(colour.rawValue)m\(text)\u{1B}[0m"
    }
}
