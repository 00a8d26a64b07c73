/// Bodies up to this size are kept in the row.
public enum CaptureLimits {
    public static let inlineBodyLimit = 16 * 1024
}
