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

    func paint(_ text: String, _ colour: Colour?) -> String {
        guard self.colour, let colour else { return text }
        return "\u{1B}[\(colour.rawValue)m\(text)\u{1B}[0m"
    }
}
