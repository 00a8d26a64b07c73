import Foundation

/// Output longer than the terminal goes through `$PAGER` (`less -FRX` when
/// unset), as git does; to a pipe or a file it is written as is.
enum Pager {
    static func print(_ text: String, page: Bool) {
        let data = Data(text.utf8)
        guard page, isatty(STDOUT_FILENO) == 1, isatty(STDIN_FILENO) == 1, longerThanScreen(text) else {
            FileHandle.standardOutput.write(data)
            return
        }
        let pager = ProcessInfo.processInfo.environment["PAGER"].flatMap { $0.isEmpty ? nil : $0 } ?? "less -FRX"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", pager]
        let pipe = Pipe()
        process.standardInput = pipe
        do {
            try process.run()
        } catch {
            FileHandle.standardOutput.write(data)
            return
        }
        // The pager may quit before reading everything: that is not an error.
        signal(SIGPIPE, SIG_IGN)
        try? pipe.fileHandleForWriting.write(contentsOf: data)
        try? pipe.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    private static func longerThanScreen(_ text: String) -> Bool {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return false }
        return text.utf8.lazy.filter { $0 == UInt8(ascii: "\n") }.count >= Int(size.ws_row)
    }
}
