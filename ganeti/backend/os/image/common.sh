# Shared by the scripts of the image OS (sourced, not run).

fail() {
    echo "image OS: $*" >&2
    exit 1
}

# The image file named by the OS parameter "image", checked.
image_file() {
    file="${OSP_IMAGE#file://}"
    [ -n "$file" ] || fail "the OS parameter 'image' is not set"
    case "$file" in
        /*) ;;
        *://*) fail "only local image files are supported, not $OSP_IMAGE" ;;
        *) fail "the image path must be absolute, not $file" ;;
    esac
    [ -f "$file" ] || fail "image $file does not exist or is not a regular file"
    [ -r "$file" ] || fail "image $file is not readable"
    echo "$file"
}

# The first disk, checked.
first_disk() {
    [ "${DISK_COUNT:-0}" -ge 1 ] || fail "instance $INSTANCE_NAME has no disk"
    [ -n "$DISK_0_PATH" ] && [ -e "$DISK_0_PATH" ] || fail "disk 0 ($DISK_0_PATH) does not exist"
    echo "$DISK_0_PATH"
}

size_of() {
    if [ -b "$1" ]; then
        blockdev --getsize64 "$1"
    else
        stat -L -c %s "$1"
    fi
}

# The disk an export reads: EXPORT_DEVICE, else disk 0; checked.
export_disk() {
    if [ -n "$EXPORT_DEVICE" ]; then
        [ -e "$EXPORT_DEVICE" ] || fail "export device $EXPORT_DEVICE does not exist"
        echo "$EXPORT_DEVICE"
    else
        first_disk
    fi
}

# The disk an import writes: IMPORT_DEVICE, else disk 0; checked.
import_disk() {
    if [ -n "$IMPORT_DEVICE" ]; then
        [ -e "$IMPORT_DEVICE" ] || fail "import device $IMPORT_DEVICE does not exist"
        echo "$IMPORT_DEVICE"
    else
        first_disk
    fi
}
