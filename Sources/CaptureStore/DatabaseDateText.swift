import Foundation

/// Dates as GRDB stores them ("yyyy-MM-dd HH:mm:ss.SSS", UTC), written with
/// integer arithmetic: GRDB's DateFormatter was half of an insert's cost.
public enum DatabaseDateText {
    /// RFC 3339 with milliseconds, UTC (`2026-11-23T19:17:30.123Z`): the CLI's JSON.
    public static func iso8601(_ date: Date) -> String {
        var text = string(date)
        text.replace(" ", with: "T", maxReplacements: 1)
        return text + "Z"
    }

    /// Years 0001 to 9999: the text's four digits hold no other (a date
    /// beyond is clamped, not trapped on).
    static let representable: ClosedRange<Double> = -62_135_596_800_000...253_402_300_799_999

    public static func string(_ date: Date) -> String {
        let raw = (date.timeIntervalSince1970 * 1000).rounded()
        let ms = Int64(raw.isNaN ? 0 : min(max(raw, representable.lowerBound), representable.upperBound))
        let days = ms >= 0 ? ms / 86_400_000 : (ms - 86_399_999) / 86_400_000
        var rest = ms - days * 86_400_000
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        let hour = rest / 3_600_000
        rest -= hour * 3_600_000
        let minute = rest / 60_000
        rest -= minute * 60_000
        let second = rest / 1000
        let milli = rest - second * 1000

        return String(unsafeUninitializedCapacity: 23) { out in
            var at = 0
            func put(_ value: Int64, _ width: Int, then separator: UInt8?) {
                var v = value
                for i in stride(from: at + width - 1, through: at, by: -1) {
                    out[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: v % 10)
                    v /= 10
                }
                at += width
                if let separator {
                    out[at] = separator
                    at += 1
                }
            }
            put(year, 4, then: UInt8(ascii: "-"))
            put(month, 2, then: UInt8(ascii: "-"))
            put(day, 2, then: UInt8(ascii: " "))
            put(hour, 2, then: UInt8(ascii: ":"))
            put(minute, 2, then: UInt8(ascii: ":"))
            put(second, 2, then: UInt8(ascii: "."))
            put(milli, 3, then: nil)
            return at
        }
    }
}
