/// What `busymate --version` prints and exports name as their creator.
public enum BusymateVersion {
    public static let current = "0.1.0"
}
