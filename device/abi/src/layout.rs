//! How the verbs ABI describes itself for the driver's C header: each
//! field's C type ([`CType`]), the layouts of fields and structs, the
//! `abi_struct!` macro that declares a guest-memory struct with its layout,
//! and the C rendering of those layouts ([`c_structs`]). The structs
//! themselves are in `verbs.rs`.

use vm_memory::{Le16, Le32, Le64};

/// C type of an ABI field, for header generation.
pub trait CType {
    /// The C declaration of a field called `name` of this type.
    fn c_decl(name: &str) -> String;
}

impl CType for u8 {
    fn c_decl(name: &str) -> String {
        format!("__u8 {name}")
    }
}
impl CType for Le16 {
    fn c_decl(name: &str) -> String {
        format!("__le16 {name}")
    }
}
impl CType for Le32 {
    fn c_decl(name: &str) -> String {
        format!("__le32 {name}")
    }
}
impl CType for Le64 {
    fn c_decl(name: &str) -> String {
        format!("__le64 {name}")
    }
}
impl<const N: usize> CType for [u8; N] {
    fn c_decl(name: &str) -> String {
        format!("__u8 {name}[{N}]")
    }
}

/// Layout of one field.
#[derive(Debug, Clone)]
pub struct FieldLayout {
    /// Field name.
    pub name: &'static str,
    /// Byte offset.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// C declaration.
    pub c_decl: String,
    /// Description.
    pub doc: &'static str,
}

/// Layout of one struct.
#[derive(Debug, Clone)]
pub struct StructLayout {
    /// C struct name (`struct ibtca_<name>`).
    pub c_name: &'static str,
    /// Description.
    pub doc: &'static str,
    /// Size in bytes.
    pub size: usize,
    /// Fields in order.
    pub fields: Vec<FieldLayout>,
}

macro_rules! abi_struct {
    (
        $(#[doc = $doc:literal])*
        $name:ident = $cname:literal {
            $( $(#[doc = $fdoc:literal])* $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            $( $(#[doc = $fdoc])* pub $field: $ty, )*
        }

        // SAFETY: a #[repr(C)] struct of little-endian integers, byte arrays
        // and other such structs: every bit pattern is a valid value, and the
        // `abi_structs_have_no_padding` test checks there is no padding.
        unsafe impl vm_memory::ByteValued for $name {}

        impl Default for $name {
            fn default() -> Self {
                // SAFETY: integers and byte arrays only (see above): all-zero
                // bytes are a valid value.
                unsafe { std::mem::zeroed() }
            }
        }

        impl $name {
            /// Field layout, for the C header and the padding check.
            pub fn layout() -> $crate::layout::StructLayout {
                $crate::layout::StructLayout {
                    c_name: $cname,
                    doc: concat!($($doc),*),
                    size: std::mem::size_of::<$name>(),
                    fields: vec![ $( $crate::layout::FieldLayout {
                        name: stringify!($field),
                        offset: std::mem::offset_of!($name, $field),
                        size: std::mem::size_of::<$ty>(),
                        c_decl: <$ty as $crate::layout::CType>::c_decl(stringify!($field)),
                        doc: concat!($($fdoc),*),
                    }, )* ],
                }
            }
        }
    };
}
pub(crate) use abi_struct;

/// Renders C structs for `layouts` (used for `guest-driver/include/ibtca_abi.h`).
pub fn c_structs(layouts: &[StructLayout]) -> String {
    let mut s = String::new();
    for l in layouts {
        s.push_str(&format!(
            "/* {} */\nstruct ibtca_{} {{\n",
            l.doc.trim(),
            l.c_name
        ));
        for f in &l.fields {
            s.push_str(&format!(
                "\t{};\t/* {:#04x}: {} */\n",
                f.c_decl,
                f.offset,
                f.doc.trim()
            ));
        }
        s.push_str("} __packed;\n");
        s.push_str(&format!(
            "static_assert(sizeof(struct ibtca_{}) == {});\n\n",
            l.c_name, l.size
        ));
    }
    s
}
