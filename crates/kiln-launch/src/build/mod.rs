//! The launch loop, in named steps: the host's part (`prepare`: the checkout, its plan and its
//! packing, in a blocking task), then attempts of the plan (`launch`), each in a container
//! (`attempt`: the checkout put in place, the setup phase with the repair rules of its
//! ecosystem in `setup`, the image committed and the baseline run in `baseline`), with
//! environment reuse in `reuse`, and the Dockerfile check. `checkout` is the host checkout,
//! which `kiln check-images --rebuild` shares.

mod attempt;
mod baseline;
mod checkout;
mod error;
mod launch;
mod phases;
mod prepare;
mod reuse;
mod setup;
mod work;

pub use checkout::{PackedCheckout, packed_checkout};
pub use error::LaunchError;
pub use launch::launch;
