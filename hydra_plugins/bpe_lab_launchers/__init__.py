"""bpe-lab's Hydra launchers (Hydra loads launcher plugins only from the `hydra_plugins`
namespace): `joblib_launcher.JoblibLauncher`, selected by `hydra/launcher=joblib`."""
