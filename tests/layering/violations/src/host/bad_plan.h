// Fixture (not compiled): stands for an executor header.
#pragma once
