"""Hypervisor names and the values hypervisors report over RPC.

Shared by the node side (L{ganeti.backend.hypervisor}, which implements
the hypervisors) and the master side (the logical units in
L{ganeti.cmdlib}, which read what noded reports), so neither reaches into
the other.  Values are Ganeti's.  Nothing but constants.
"""

from __future__ import annotations

#: the hypervisor kinds this cluster implements
HT_FAKE = "fake"
HT_KVM = "kvm"

#: an instance's state in instance info (Ganeti's HvInstanceState): running
STATE_RUNNING = 0
#: the guest powered itself off; its process still exists
STATE_SHUTDOWN = 1

#: the kinds of console info
CONS_MESSAGE = "msg"
CONS_SSH = "ssh"
CONS_VNC = "vnc"
CONS_SPICE = "spice"

#: the parameters each hypervisor takes, with their types (C{bool}, C{int}, C{string}: the
#: master's parsers in L{ganeti.cmdlib.instance_params})
HV_PARAMETER_TYPES: dict[str, dict[str, str]] = {
    "fake": {"migration_mode": "string"},
    "kvm": {
        **{key: "bool" for key in (
            "acpi", "serial_console", "use_chroot", "use_localtime", "vhost_net", "vnc_tls", "vnc_x509_verify",
            "spice_use_tls", "spice_use_vdagent", "spice_playback_compression", "user_shutdown",
            "use_guest_agent", "vnet_hdr")},
        **{key: "int" for key in (
            "cpu_cores", "cpu_sockets", "cpu_threads", "migration_bandwidth", "migration_downtime",
            "migration_port", "serial_speed", "spice_ip_version", "virtio_net_queues", "kvm_pci_reservations")},
        **{key: "string" for key in (
            "boot_order", "cdrom_image_path", "cdrom2_image_path", "cdrom_disk_type", "cpu_mask", "cpu_type",
            "disk_aio", "disk_cache", "disk_discard", "disk_type", "floppy_image_path", "initrd_path",
            "kernel_args", "kernel_path", "keymap", "kvm_extra", "kvm_flag", "kvm_path", "machine_version",
            "mem_path", "migration_caps", "migration_mode", "nic_type", "reboot_behavior", "root_path",
            "security_domain", "security_model", "soundhw", "spice_bind", "spice_image_compression",
            "spice_jpeg_wan_compression", "spice_password_file", "spice_streaming_video", "spice_tls_ciphers",
            "spice_zlib_glz_wan_compression", "usb_devices", "usb_mouse", "vga", "vnc_bind_address",
            "vnc_password_file", "vnc_x509_path", "scsi_controller_type", "pci_pass")},
    },
}
