"""Point the ROS 2 wheels' CMake exports at this interpreter's include dirs.

The PyPI ROS 2 wheels ship share/*/cmake/*__rosidl_generator_pyExport*.cmake
files that name the wheel builder's Python and numpy include directories
(/opt/python/cp311-cp311/...). CMake refuses targets whose
INTERFACE_INCLUDE_DIRECTORIES do not exist ("includes non-existent path"),
so rosidl_generate_interfaces() fails for any package depending on them.
This rewrites those paths to sysconfig's include dir and numpy.get_include()
of the interpreter running this script. Idempotent.

Usage: <venv>/bin/python tools/fix_wheel_cmake_paths.py [prefix]
(prefix defaults to sys.prefix)
"""

import glob
import os
import re
import sys
import sysconfig

import numpy

# The wheel builder's dirs: .../include/python3.X and .../numpy/(_core|core)/include
PY_INCLUDE = re.compile(r'/opt/python/cp3\d+-cp3\d+t?/include/python3\.\d+t?')
NUMPY_INCLUDE = re.compile(
    r'/opt/python/cp3\d+-cp3\d+t?/lib/python3\.\d+t?/site-packages/numpy/(?:_core|core)/include')


def main():
    prefix = sys.argv[1] if len(sys.argv) > 1 else sys.prefix
    py_include = sysconfig.get_paths()['include']
    np_include = numpy.get_include()
    for path, what in ((py_include, 'Python.h'), (np_include, 'numpy/arrayobject.h')):
        if not os.path.isfile(os.path.join(path, what)):
            sys.exit(f'error: {os.path.join(path, what)} not found: the Python development '
                     'headers are needed to build the messages (Debian: apt-get install python3-dev)')
    changed = 0
    pattern = os.path.join(prefix, 'share', '*', 'cmake', '*Export*.cmake')
    for name in glob.glob(pattern):
        with open(name, encoding='utf-8') as f:
            text = f.read()
        new = NUMPY_INCLUDE.sub(lambda _: np_include, text)
        new = PY_INCLUDE.sub(lambda _: py_include, new)
        if new != text:
            with open(name, 'w', encoding='utf-8') as f:
                f.write(new)
            changed += 1
    print(f'fix_wheel_cmake_paths: {changed} file(s) rewritten under {prefix}/share')


if __name__ == '__main__':
    main()
